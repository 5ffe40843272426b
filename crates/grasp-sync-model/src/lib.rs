//! NIP-34 data model, sync indices and the three-way diff (not yet implemented).
