// Header-only module: see include/CLoadingAtomics.h.
