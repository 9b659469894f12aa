"""Pure functions History -> results. No I/O here (histogram files are written by report/)."""
