//! A solve as bytes, between pinplan and its solver worker
//! ([`super::child`]): the request (the model, the objective, the time
//! limit, the known start, the settings read in the parent) and the answer.
//! Both ends are the same build, so the format has no version; the parent
//! still checks every answer's shape ([`decode_answer`]), and the worker
//! answers a request it cannot read with a message, never a guess.

use super::expr::Var;
use super::model::{Column, Model, Op, Raw, Refusal, Row};
use super::settings::Settings;
use std::time::Duration;

/// A decoded request: what the worker solves.
pub(super) struct Request {
    pub(super) model: Model,
    pub(super) objective: Vec<(Var, f64)>,
    pub(super) time_limit: Duration,
    pub(super) start: Option<Vec<f64>>,
    pub(super) settings: Settings,
}

/// Bytes being written.
#[derive(Default)]
struct Writer(Vec<u8>);

impl Writer {
    fn byte(&mut self, b: u8) {
        self.0.push(b);
    }
    fn count(&mut self, n: usize) {
        self.0.extend_from_slice(&(n as u64).to_le_bytes());
    }
    fn float(&mut self, x: f64) {
        self.0.extend_from_slice(&x.to_le_bytes());
    }
    fn text(&mut self, s: &str) {
        self.count(s.len());
        self.0.extend_from_slice(s.as_bytes());
    }
    fn terms(&mut self, terms: &[(Var, f64)]) {
        self.count(terms.len());
        for &(v, c) in terms {
            self.count(v.index());
            self.float(c);
        }
    }
}

/// Bytes being read; every read checks that the bytes are there.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head)
    }
    fn byte(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }
    fn count(&mut self) -> Option<usize> {
        let bytes: [u8; 8] = self.take(8)?.try_into().ok()?;
        usize::try_from(u64::from_le_bytes(bytes)).ok()
    }
    /// A count of items of at least `size` bytes each, no more than the
    /// bytes left can hold (a wrong count allocates nothing huge).
    fn items(&mut self, size: usize) -> Option<usize> {
        let n = self.count()?;
        (n.checked_mul(size)? <= self.0.len()).then_some(n)
    }
    fn float(&mut self) -> Option<f64> {
        let bytes: [u8; 8] = self.take(8)?.try_into().ok()?;
        Some(f64::from_le_bytes(bytes))
    }
    fn text(&mut self) -> Option<String> {
        let n = self.count()?;
        String::from_utf8(self.take(n)?.to_vec()).ok()
    }
    fn terms(&mut self, columns: usize) -> Option<Vec<(Var, f64)>> {
        let n = self.items(16)?;
        (0..n)
            .map(|_| {
                let v = self.count().filter(|&v| v < columns)?;
                Some((Var::new(v), self.float()?))
            })
            .collect()
    }
}

/// The request for solving `model`, minimising `objective`, as bytes.
pub(super) fn encode_request(
    model: &Model,
    objective: &[(Var, f64)],
    time_limit: Duration,
    start: Option<&[f64]>,
    settings: &Settings,
) -> Vec<u8> {
    let nonzeros: usize = model.rows.iter().map(|r| r.terms.len()).sum();
    let mut w = Writer(Vec::with_capacity(
        64 + 17 * model.columns.len() + 25 * model.rows.len() + 16 * nonzeros,
    ));
    w.float(time_limit.as_secs_f64());
    w.byte(settings.fault_code());
    w.count(settings.cbc_params.len());
    for (key, value) in &settings.cbc_params {
        w.text(key);
        w.text(value);
    }
    w.count(model.columns.len());
    for c in &model.columns {
        w.byte(u8::from(c.integer));
        w.float(c.min);
        w.float(c.max);
    }
    w.count(model.rows.len());
    for r in &model.rows {
        w.byte(match r.op {
            Op::Le => 0,
            Op::Ge => 1,
            Op::Eq => 2,
        });
        w.float(r.rhs);
        w.terms(&r.terms);
    }
    w.terms(objective);
    match start {
        Some(start) => {
            w.byte(1);
            w.count(start.len());
            start.iter().for_each(|&x| w.float(x));
        }
        None => w.byte(0),
    }
    w.0
}

/// [`encode_request`]'s request back; `None` when the bytes are not one.
pub(super) fn decode_request(bytes: &[u8]) -> Option<Request> {
    let mut r = Reader(bytes);
    let seconds = r.float()?;
    let time_limit = Duration::try_from_secs_f64(seconds).ok()?;
    let fault = r.byte()?;
    let params = r.items(16)?;
    let cbc_params = (0..params)
        .map(|_| Some((r.text()?, r.text()?)))
        .collect::<Option<Vec<_>>>()?;
    let settings = Settings::in_worker(cbc_params, fault)?;
    let columns = (0..r.items(17)?)
        .map(|_| {
            Some(Column {
                integer: r.byte()? == 1,
                min: r.float()?,
                max: r.float()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let n = columns.len();
    let rows = (0..r.items(17)?)
        .map(|_| {
            let op = match r.byte()? {
                0 => Op::Le,
                1 => Op::Ge,
                2 => Op::Eq,
                _ => return None,
            };
            let rhs = r.float()?;
            Some(Row {
                terms: r.terms(n)?,
                op,
                rhs,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    let objective = r.terms(n)?;
    let start = match r.byte()? {
        0 => None,
        1 => Some(
            (0..r.items(8)?)
                .map(|_| r.float())
                .collect::<Option<Vec<_>>>()?,
        ),
        _ => return None,
    };
    r.0.is_empty().then_some(Request {
        model: Model { columns, rows },
        objective,
        time_limit,
        start,
        settings,
    })
}

/// The worker's answer to a request it could not read: never decoded as an
/// answer ([`decode_answer`] gives `None`).
pub(super) const UNREADABLE: &[u8] = &[2];

/// The worker's answer as bytes: `0`, proven (0 or 1), then each value as a
/// little-endian f64; or `1` and the backend's message; or `3` alone for a
/// model proven infeasible.
pub(super) fn encode_answer(raw: &Result<Raw, Refusal>) -> Vec<u8> {
    match raw {
        Ok(raw) => {
            let mut out = Vec::with_capacity(2 + 8 * raw.values.len());
            out.push(0);
            out.push(u8::from(raw.proven));
            for x in &raw.values {
                out.extend_from_slice(&x.to_le_bytes());
            }
            out
        }
        Err(Refusal::Other(message)) => {
            let mut out = vec![1];
            out.extend_from_slice(message.as_bytes());
            out
        }
        Err(Refusal::Infeasible) => vec![3],
    }
}

/// [`encode_answer`]'s answer back, for a model of `columns` variables;
/// `None` when the bytes are not one.
pub(super) fn decode_answer(bytes: &[u8], columns: usize) -> Option<Result<Raw, Refusal>> {
    match bytes.split_first()? {
        (0, rest) => {
            let (&proven, values) = rest.split_first()?;
            if values.len() != 8 * columns || proven > 1 {
                return None;
            }
            let values = values
                .chunks_exact(8)
                .map(|b| b.try_into().map(f64::from_le_bytes))
                .collect::<Result<Vec<f64>, _>>()
                .ok()?;
            Some(Ok(Raw {
                values,
                proven: proven == 1,
            }))
        }
        (1, message) => Some(Err(Refusal::Other(
            String::from_utf8_lossy(message).into_owned(),
        ))),
        (3, []) => Some(Err(Refusal::Infeasible)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> (Model, Vec<(Var, f64)>) {
        let mut m = Model::default();
        let x = m.int(4.0);
        let y = m.binary();
        m.le(x + 2.0 * y, 5.0);
        m.ge(x, 1.0);
        m.eq(y, 1.0);
        (m, vec![(x, -1.0), (y, 0.5)])
    }

    /// A request reads back as written, model, objective, limit, start and
    /// settings.
    #[test]
    fn requests_are_decoded_as_encoded() {
        let (m, objective) = sample();
        let settings = Settings::in_worker(vec![("cuts".to_owned(), "off".to_owned())], 0).unwrap();
        for start in [None, Some(&[1.0, 0.0][..])] {
            let bytes = encode_request(
                &m,
                &objective,
                Duration::from_millis(1500),
                start,
                &settings,
            );
            let back = decode_request(&bytes).unwrap();
            assert_eq!(format!("{:?}", back.model), format!("{m:?}"));
            assert_eq!(back.objective, objective);
            assert_eq!(back.time_limit, Duration::from_millis(1500));
            assert_eq!(back.start.as_deref(), start);
            assert_eq!(back.settings.cbc_params, settings.cbc_params);
            // Every cut is refused, never read as something else.
            for end in 0..bytes.len() {
                assert!(decode_request(&bytes[..end]).is_none(), "{end}");
            }
        }
    }

    /// A variable out of the model's range, a bad sense or trailing bytes
    /// make a request unreadable.
    #[test]
    fn bad_requests_are_refused() {
        let (m, objective) = sample();
        let settings = Settings::default();
        let good = encode_request(&m, &objective, Duration::from_secs(1), None, &settings);
        let mut trailing = good.clone();
        trailing.push(0);
        assert!(decode_request(&trailing).is_none());
        let bad_var = encode_request(
            &m,
            &[(Var::new(7), 1.0)],
            Duration::from_secs(1),
            None,
            &settings,
        );
        assert!(decode_request(&bad_var).is_none());
        let mut huge = good;
        // The parameter count, after the limit and the fault byte.
        huge[9..17].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(decode_request(&huge).is_none());
    }

    /// Bytes out, bytes back: every answer, and nothing else.
    #[test]
    fn answers_are_decoded_as_encoded() {
        for raw in [
            Ok(Raw {
                values: vec![],
                proven: false,
            }),
            Ok(Raw {
                values: vec![0.5, -3.0, 1e9],
                proven: true,
            }),
            Err(Refusal::Other("Stopped".to_owned())),
            Err(Refusal::Infeasible),
        ] {
            let columns = raw.as_ref().map_or(0, |r| r.values.len());
            assert_eq!(decode_answer(&encode_answer(&raw), columns), Some(raw));
        }
        for bytes in [
            &[][..],
            &[0],
            &[0, 1, 0, 0],
            &[0, 2],
            &[7, 1],
            &[3, 0],
            UNREADABLE,
        ] {
            assert_eq!(decode_answer(bytes, 0), None, "{bytes:?}");
        }
    }
}
