//! Getting data in: image decoding, importers for public layouts, and the synthetic phantom.

pub mod contact_sheet;
pub mod crops;
pub mod images;
pub mod import;
pub mod phantom;
pub mod refine;
pub mod tracklets;
pub mod vocabulary;
