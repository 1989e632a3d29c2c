//! (being written: repack against a brute-force minimum)
