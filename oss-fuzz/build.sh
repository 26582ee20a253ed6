#!/bin/bash -eu
# OSS-Fuzz build for epfuzz: the project keeps one build script, shared with ClusterFuzzLite.
exec "$SRC/epfuzz/.clusterfuzzlite/build.sh"
