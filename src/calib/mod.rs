//! The calibration chain for real scans (issue 12): what a reconstruction
//! needs besides the data, computed from reference scans.
