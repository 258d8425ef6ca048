"""The pure event log: sessions, surface fold, invariants, repair, fork planning, format versions."""
