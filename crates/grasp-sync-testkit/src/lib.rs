//! Local relay networks for tests, the demo and the simulator (not yet implemented).
