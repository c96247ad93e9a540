//! CUPTI and what surrounds it: the only code that calls CUPTI, the API calls it records, its
//! buffers' memory and their raw dump. Imports host/ only.

pub mod api;
pub mod libcupti;
pub mod pages;
pub mod pool;
pub mod rawdump;
