"""Stacks and symbols: kernel and user symbols, Python perf maps, classification rules."""
