"""The schedule primitives: one module per primitive, each with its before/after docstring, the function that
rewrites a trial `State`, and its `@primitive` declaration (registry.py builds the `Schedule` methods, the usage
texts and the trace form from the declarations); common.py resolves names.  To add a primitive, see "Adding a
primitive" in docs/primitives.md."""
