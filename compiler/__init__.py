"""The layer compiler: a dense layer and a wafer configuration -> the configuration writes of one phase."""
