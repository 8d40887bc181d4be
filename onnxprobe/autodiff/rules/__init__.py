"""Gradient rules, one module per op family. Importing a module registers its rules."""
