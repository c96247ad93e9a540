//! Cross-thread stores that call nothing above them: the library's phase, the captures asked
//! for, the live figures. Imports host/ only.

pub mod captures;
pub mod live;
pub mod phase;
