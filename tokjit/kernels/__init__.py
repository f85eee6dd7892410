"""numba kernels: flat numpy arrays in, flat numpy arrays out."""
