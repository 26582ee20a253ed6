"""Continuous fuzzing: the harness table and its entry points, OSS-Fuzz packaging, corpus upkeep, the
seeds.
"""
