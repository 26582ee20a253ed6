"""Inputs on disk: case files, corpus inputs and their verdicts (corpus); loading any input (replay).
"""
