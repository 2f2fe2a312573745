"""The engine: plays a compiled Program on the timeline of cores, SRAM buffers, L2 and HBM."""
