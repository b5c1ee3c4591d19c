//! PLACEHOLDER: transcripts and atomic files (SPEC §5), being written by a helper.
