"""`epfuzz fuzz`: the libFuzzer, guided and guest campaigns and what they share.
"""
