"""The `epfuzz` command: its arguments, its commands, the guards around them.
"""
