"""What every layer uses: the error types, logging, child processes, full disks, folder locks, optional
extras.
"""
