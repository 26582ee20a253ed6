"""A scenario as bytes or JSON, with the fields a protocol and a preset pin held fixed.
"""
