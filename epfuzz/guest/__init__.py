"""The soft-RoCE QEMU guest the verbs backend runs in: its image, its boot, the project packed for it.
"""
