"""Malformed programs made from examples/*.tdsl (see generate.py and tests/test_malformed.py)."""
