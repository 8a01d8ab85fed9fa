"""Target-specific tile-program passes (each `TileProgram -> TileProgram`), run by compiler/lower/pipeline.py."""
