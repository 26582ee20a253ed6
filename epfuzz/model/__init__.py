"""The model around a run: the ordering rule table, the epoch's expected image, the oracle, what a
protocol's ops follow.
"""
