//! One request's coordinates, from which the item workload and a target's templates draw.

/// What a worker asks for with one request: the request's index in its phase (`seq`), the
/// worker sending it, and the id the request is about (the item id on our servers, the
/// `{{id}}` of a target's templates).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Call {
    pub id: u64,
    pub seq: u64,
    pub worker: u32,
}

impl Call {
    /// A request for item `id` (worker 0, `seq` = `id`): how tests ask.
    pub fn item(id: u64) -> Self {
        Call {
            id,
            seq: id,
            worker: 0,
        }
    }
}

impl From<u64> for Call {
    fn from(id: u64) -> Self {
        Call::item(id)
    }
}
