"""What every printer shares: the printer base, dtype tables, the module's symbol table, quoting, the launcher."""
