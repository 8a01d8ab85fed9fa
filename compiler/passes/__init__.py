"""Target-specific tile-program passes (each `TileProgram -> TileProgram`), run by compiler/pipeline.py."""
