"""The compiled emulator: which modules run compiled or pure (native) and their mypyc build
(corebuild).
"""
