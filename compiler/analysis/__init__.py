"""What a legal schedule costs and needs: the buffer plan and capacity check (buffer_plan.py), the placement of
products on compute units and of operands in memory (placement.py), the traffic and time model (cost.py).
"""
