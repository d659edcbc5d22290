//! The index's LSH-only access: the one check of every call that needs the
//! hash tables.

use super::*;
use crate::source::lsh::Lsh;

impl Index {
    /// The LSH parts of the index, or `Unsupported` naming `what` (an
    /// LSH-only call) for another family: the one check of every LSH-only
    /// call (tables, family handles, candidates, codes, labels, IUL,
    /// updates), before anything is written.
    pub(crate) fn lsh(&self, what: &str) -> Result<&Lsh> {
        match self.src.as_any().downcast_ref::<Lsh>() {
            Some(l) => Ok(l),
            None => Err(self.not_lsh(what)),
        }
    }

    /// [`Index::lsh`], mutable.
    pub(crate) fn lsh_mut(&mut self, what: &str) -> Result<&mut Lsh> {
        let e = self.not_lsh(what);
        let src: &mut dyn CandidateSource = &mut *self.src;
        src.as_any_mut().downcast_mut::<Lsh>().ok_or(e)
    }

    fn not_lsh(&self, what: &str) -> Error {
        Error::new(
            Status::Unsupported,
            format!(
                "{what} needs an LSH family (SimHash or DWTA: hash tables); this index is the {} family",
                self.source_name()
            ),
        )
    }
}
