# Cython declarations for rows.py (the compiled core, see setup.py): the value checks called a
# dozen times per row become C functions, the .py stays the one source and the pure-Python path.

cdef object _s(object v)
cdef object _i(object v)
cdef object _b(object v)
