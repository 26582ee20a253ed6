import os
import sys

# `python -m epfuzz` puts the current folder first on sys.path: in a folder of downloaded artifacts
# a later import (numpy, matplotlib) could pick up a file lying there. epfuzz is imported already;
# a plug-in named with --protocol is still looked for there (epfuzz.protocols.trust)
if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from epfuzz.cli.entry import main  # noqa: E402

raise SystemExit(main())
