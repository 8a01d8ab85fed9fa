"""What users call: the Python API (api.py), the `tdsl` command (cli.py), module generation and loading
(generate.py), and the assertions for user tests (testing.py).
"""
