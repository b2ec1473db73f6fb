"""Pure transformations: DataFrames in, DataFrames out; no reading, writing or sessions."""
