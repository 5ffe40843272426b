//! Byte-budgeted filter building, REQ packing and pagination planning (not yet implemented).
