#!/usr/bin/env python3
# Stands in for nanopb's generator in tests/deps/check_missing.sh: a generator whose Python lacks
# the protobuf package fails at its first import, as this does.
import google.protobuf_for_the_test  # noqa: F401
