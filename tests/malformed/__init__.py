"""Malformed programs made from examples/*.tdsl (see generate.py and tests/frontend/test_malformed.py)."""
