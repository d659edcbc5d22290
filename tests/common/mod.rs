//! Helpers shared by several integration tests (each test file that needs
//! them declares `mod common;`).
#![allow(dead_code)] // each test crate uses a different subset

pub mod container;
pub mod ivf;
pub mod qdot;
pub mod tiers;
