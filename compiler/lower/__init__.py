"""From a schedule tree to the tile program a printer reads: lowering (build.py, with its decisions in loops.py,
geometry.py, loads.py, registers.py, reductions.py), the tile IR (tileir.py) and its text (tileir_text.py),
lane masks, the per-backend passes (passes/) and their order (pipeline.py).
"""
