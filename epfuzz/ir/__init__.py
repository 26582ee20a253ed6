"""The scenario IR: its fields and choice sequence, the presets, the op language, the payload.
"""
