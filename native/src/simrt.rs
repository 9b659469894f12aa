//! What the simulator's native core shares with replicalab's Python virtual runtime: the
//! clock and event heap of a `VirtualRuntime` (read and written in place, so Python tasks,
//! Python callbacks and native steps share one time order), the seeded random stream
//! (`Stream`: the same buffered numpy draws as `replicalab.sim.random.Stream`), delay
//! distributions, and the simulated server (`SimNode`).
//!
//! A native step that would be the next thing to happen anyway runs at once, moving the
//! clock (as `VirtualRuntime.continue_after` does in Python): a `Window` is opened on the
//! runtime when native code is entered and says, for a step due at `t`, whether nothing
//! else could run before it (no task ready, every timer later, no Ctrl-C pending).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use pyo3::{intern, PyTraverseError};
use pyo3::gc::PyVisit;

/// Steps run at once in a row before one goes through the loop (`_SKIP_BUDGET` in
/// `runtime/virtual.py`).
pub const SKIP_BUDGET: i64 = 256;

/// One buffered sampler: values drawn a block at a time by a numpy Generator method.
struct Block {
    vals: Vec<f64>,
    i: usize,
    fill: Py<PyAny>,
}

/// The size of a block (`_BLOCK` in `sim/random.py`).
const BLOCK: usize = 8192;

impl Block {
    fn new(py: Python<'_>, fill: Py<PyAny>) -> PyResult<Block> {
        let vals = draw_block(py, &fill)?;
        Ok(Block { vals, i: 0, fill })
    }

    #[inline]
    fn next(&mut self, py: Python<'_>) -> PyResult<f64> {
        if self.i == BLOCK {
            self.vals = draw_block(py, &self.fill)?;
            self.i = 0;
        }
        let v = self.vals[self.i];
        self.i += 1;
        Ok(v)
    }
}

fn draw_block(py: Python<'_>, fill: &Py<PyAny>) -> PyResult<Vec<f64>> {
    let arr = fill.call1(py, (BLOCK,))?;
    let raw = arr.call_method1(py, intern!(py, "astype"), ("<f8",))?
        .call_method0(py, intern!(py, "tobytes"))?;
    let b = raw.bind(py).cast::<PyBytes>()?.as_bytes();
    if b.len() != BLOCK * 8 {
        return Err(PyValueError::new_err("Stream: a block must hold 8192 float64 values"));
    }
    Ok(b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect())
}

/// Seeded draws in blocks, the same sequence as `replicalab.sim.random.Stream` for the
/// same numpy Generator: normal, uniform and exponential blocks are filled in that order
/// when it is made, and each again when it runs out.
#[pyclass(module = "replicalab_native")]
pub struct Stream {
    blocks: [Block; 3],
}

impl Stream {
    #[inline]
    pub fn normal(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.blocks[0].next(py)
    }
    #[inline]
    pub fn uniform(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.blocks[1].next(py)
    }
    #[inline]
    pub fn exponential(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.blocks[2].next(py)
    }
    /// A uniform integer in [0, n), as `Stream.index`.
    #[inline]
    pub fn index(&mut self, py: Python<'_>, n: usize) -> PyResult<usize> {
        Ok((self.uniform(py)? * n as f64) as usize)
    }
}

#[pymethods]
impl Stream {
    #[new]
    fn py_new(py: Python<'_>, rng: &Bound<'_, PyAny>) -> PyResult<Stream> {
        let normal = Block::new(py, rng.getattr("standard_normal")?.unbind())?;
        let uniform = Block::new(py, rng.getattr("random")?.unbind())?;
        let expo = Block::new(py, rng.getattr("standard_exponential")?.unbind())?;
        Ok(Stream { blocks: [normal, uniform, expo] })
    }

    /// Return a standard normal draw.
    #[pyo3(name = "normal")]
    fn py_normal(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.normal(py)
    }

    /// Return a uniform draw in [0, 1).
    #[pyo3(name = "uniform")]
    fn py_uniform(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.uniform(py)
    }

    /// Return a standard exponential draw (mean 1).
    #[pyo3(name = "exponential")]
    fn py_exponential(&mut self, py: Python<'_>) -> PyResult<f64> {
        self.exponential(py)
    }

    /// Return a uniform integer in [0, n).
    #[pyo3(name = "index")]
    fn py_index(&mut self, py: Python<'_>, n: usize) -> PyResult<usize> {
        self.index(py, n)
    }

    /// Return one delay in ns of the distribution (mean, sd, tail, floor) in ns: exactly
    /// ``sim.network.Delay.draw`` (normal part, exponential tail, floor) in one call.
    fn delay(&mut self, py: Python<'_>, mean: i64, sd: i64, tail: i64, floor: i64)
             -> PyResult<i64> {
        Delay { mean, sd, tail, floor }.draw(py, self)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        for b in &self.blocks {
            visit.call(&b.fill)?;
        }
        Ok(())
    }
}

/// A delay distribution in ns (`sim.network.Delay`): normal(mean, sd) plus an exponential
/// tail, floored.
#[derive(Clone, Copy, Debug)]
pub struct Delay {
    pub mean: i64,
    pub sd: i64,
    pub tail: i64,
    pub floor: i64,
}

impl Delay {
    /// Read a Python `Delay`'s four fields.
    pub fn of(d: &Bound<'_, PyAny>) -> PyResult<Delay> {
        let py = d.py();
        Ok(Delay {
            mean: d.getattr(intern!(py, "mean_ns"))?.extract()?,
            sd: d.getattr(intern!(py, "sd_ns"))?.extract()?,
            tail: d.getattr(intern!(py, "tail_ns"))?.extract()?,
            floor: d.getattr(intern!(py, "floor_ns"))?.extract()?,
        })
    }

    /// One delay in ns, with exactly `Delay.draw`'s arithmetic and draws.
    #[inline]
    pub fn draw(&self, py: Python<'_>, s: &mut Stream) -> PyResult<i64> {
        let mut d = self.mean;
        if self.sd != 0 {
            d += (self.sd as f64 * s.normal(py)?) as i64;
        }
        if self.tail != 0 {
            d += (self.tail as f64 * s.exponential(py)?) as i64;
        }
        Ok(if d > self.floor { d } else { self.floor })
    }
}

/// A simulated server (the native twin of `sim.network.Node`): name, region, service time
/// per request, key/value state, the times its queue's workers are next free (a Python
/// list, shared with the Python network's pause/crash), up or down.
#[pyclass(module = "replicalab_native")]
pub struct SimNode {
    #[pyo3(get)]
    pub name: Py<PyAny>,
    #[pyo3(get)]
    pub region: Py<PyAny>,
    #[pyo3(get)]
    pub service: Py<PyAny>,
    #[pyo3(get)]
    pub state: Py<PyDict>,
    #[pyo3(get)]
    pub free_at_ns: Py<PyList>,
    #[pyo3(get, set)]
    pub up: bool,
    pub service_delay: Delay,
}

#[pymethods]
impl SimNode {
    #[new]
    #[pyo3(signature = (name, region, service, state=None, free_at_ns=None, up=true))]
    fn py_new(py: Python<'_>, name: Py<PyAny>, region: Py<PyAny>, service: Py<PyAny>,
              state: Option<Py<PyDict>>, free_at_ns: Option<Py<PyList>>, up: bool)
              -> PyResult<SimNode> {
        let service_delay = Delay::of(service.bind(py))?;
        let free = match free_at_ns {
            Some(f) => f,
            None => PyList::new(py, [0i64])?.unbind(),
        };
        Ok(SimNode { name, region, service, state: state.unwrap_or_else(|| PyDict::new(py).unbind()),
                     free_at_ns: free, up, service_delay })
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("SimNode(name={}, up={})", self.name.bind(py), self.up)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.name)?;
        visit.call(&self.region)?;
        visit.call(&self.service)?;
        visit.call(&self.state)?;
        visit.call(&self.free_at_ns)?;
        Ok(())
    }
}

impl SimNode {
    /// Queue `service_ns` of work now (`Network.process`): ns until it is done; the work
    /// goes to the worker that frees up first.
    pub fn process(&self, py: Python<'_>, now: i64, service_ns: i64) -> PyResult<i64> {
        let free = self.free_at_ns.bind(py);
        let n = free.len();
        let mut best = 0usize;
        let mut best_at: i64 = free.get_item(0)?.extract()?;
        for i in 1..n {
            let f: i64 = free.get_item(i)?.extract()?;
            if f < best_at {
                best = i;
                best_at = f;
            }
        }
        let start = if best_at > now { best_at } else { now };
        let done = start + service_ns;
        free.set_item(best, done)?;
        Ok(done - now)
    }
}

/// The Python objects through which native code reads and moves a `VirtualRuntime`.
pub struct Clock {
    pub rt: Py<PyAny>,
    heap: Py<PyList>,
    ready: Py<PyAny>,
    interrupted: Py<PyList>,
    heappush: Py<PyAny>,
    for_good: Py<PyAny>,
    timer_cls: Py<PyAny>,
}

/// Where native code stands on the clock while it runs (see the module doc).
pub struct Window {
    pub now: i64,
    skips: i64,
    horizon: i64,
    open: bool,
    start_now: i64,
    start_skips: i64,
}

impl Window {
    /// Move to `t` and return true if a step due then is the next thing that would
    /// happen; false: it must go through the heap.
    #[inline]
    pub fn skip_to(&mut self, t: i64) -> bool {
        if !self.open || t >= self.horizon {
            return false;
        }
        if self.skips == 0 {
            self.skips = SKIP_BUDGET; // this one goes through the loop
            self.open = false;
            return false;
        }
        self.skips -= 1;
        self.now = t;
        true
    }
}

impl Clock {
    /// The clock of `rt` (a `VirtualRuntime`); `for_good` and `timer_cls` are
    /// `runtime.virtual._FOR_GOOD` and `_Timer`.
    pub fn new(py: Python<'_>, rt: &Bound<'_, PyAny>, for_good: Py<PyAny>, timer_cls: Py<PyAny>)
               -> PyResult<Clock> {
        let heapq = py.import("heapq")?;
        Ok(Clock {
            rt: rt.clone().unbind(),
            heap: rt.getattr("_heap")?.cast_into::<PyList>()?.unbind(),
            ready: rt.getattr("_ready")?.unbind(),
            interrupted: rt.getattr("_interrupted")?.cast_into::<PyList>()?.unbind(),
            heappush: heapq.getattr("heappush")?.unbind(),
            for_good,
            timer_cls,
        })
    }

    /// Open a window at the runtime's present.
    pub fn open(&self, py: Python<'_>) -> PyResult<Window> {
        let rt = self.rt.bind(py);
        let now: i64 = rt.getattr(intern!(py, "_now"))?.extract()?;
        let skips: i64 = rt.getattr(intern!(py, "_skips"))?.extract()?;
        let ready_empty = self.ready.bind(py).len()? == 0;
        let interrupted = self.interrupted.bind(py).get_item(0)?.is_truthy()?;
        let heap = self.heap.bind(py);
        let horizon = if heap.len() > 0 {
            heap.get_item(0)?.cast_into::<PyTuple>()?.get_item(0)?.extract()?
        } else {
            i64::MAX
        };
        Ok(Window { now, skips, horizon, open: ready_empty && !interrupted, start_now: now,
                    start_skips: skips })
    }

    /// Write the window's time and budget back to the runtime.
    pub fn close(&self, py: Python<'_>, w: &Window) -> PyResult<()> {
        let rt = self.rt.bind(py);
        if w.now != w.start_now {
            rt.setattr(intern!(py, "_now"), w.now)?;
        }
        if w.skips != w.start_skips {
            rt.setattr(intern!(py, "_skips"), w.skips)?;
        }
        Ok(())
    }

    /// Push `f(*args)` at `when` with handle `timer` (None: for good), as `call_later`
    /// does: the next sequence number breaks ties.
    pub fn push(&self, py: Python<'_>, w: &mut Window, when: i64, timer: Option<&Bound<'_, PyAny>>,
                f: &Bound<'_, PyAny>, args: Bound<'_, PyTuple>) -> PyResult<()> {
        let rt = self.rt.bind(py);
        let seq: i64 = rt.getattr(intern!(py, "_seq"))?.extract::<i64>()? + 1;
        rt.setattr(intern!(py, "_seq"), seq)?;
        let timer = match timer {
            Some(t) => t.clone(),
            None => self.for_good.bind(py).clone(),
        };
        let entry = PyTuple::new(py, [when.into_pyobject(py)?.into_any(),
                                      seq.into_pyobject(py)?.into_any(), timer, f.clone(),
                                      args.into_any()])?;
        self.heappush.call1(py, (self.heap.bind(py), entry))?;
        if when < w.horizon {
            w.horizon = when;
        }
        Ok(())
    }

    /// A new cancellable timer handle (`runtime.virtual._Timer`).
    pub fn timer<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.timer_cls.bind(py).call0()
    }

    /// A new unresolved future of the runtime.
    pub fn future<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.rt.bind(py).call_method0(intern!(py, "future"))
    }

    /// The future of a call (`fut`, made and kept there on first use): what a parked
    /// call's client awaits.
    pub fn future_of(&self, py: Python<'_>, fut: &mut Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        if let Some(f) = fut {
            return Ok(f.clone_ref(py));
        }
        let f = self.future(py)?.unbind();
        *fut = Some(f.clone_ref(py));
        Ok(f)
    }

    /// Hand a call's outcome `out` to its client at `at` (`resolve_later` /
    /// `reject_later`): directly when `now` (nothing happens first) and the call has no
    /// future yet, else through its future `fut` (made here if none), set now or from the
    /// heap at `at`. Returns the outcome or the future.
    pub fn settle(&self, py: Python<'_>, w: &mut Window, fut: Option<Py<PyAny>>, now: bool,
                  at: i64, out: PyResult<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        if fut.is_none() && now {
            return out; // finished at once: the caller gets it directly
        }
        let fut = match fut {
            Some(f) => f,
            None => self.future(py)?.unbind(),
        };
        let fb = fut.bind(py);
        let (method, arg) = match out {
            Ok(v) => (intern!(py, "set_result"), v),
            Err(e) => (intern!(py, "set_exception"), e.into_value(py).into_any()),
        };
        if now {
            fb.call_method1(method, (arg,))?;
        } else {
            let f = fb.getattr(method)?;
            self.push(py, w, at, None, &f, PyTuple::new(py, [arg])?)?;
        }
        Ok(fut)
    }

    pub fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.rt)?;
        visit.call(&self.heap)?;
        visit.call(&self.ready)?;
        visit.call(&self.interrupted)?;
        visit.call(&self.heappush)?;
        visit.call(&self.for_good)?;
        visit.call(&self.timer_cls)?;
        Ok(())
    }
}

/// What a parked call's step leads to (the simulated store's and the reads' cores).
pub enum Next {
    /// the next step, due at this time
    At(i64),
    /// the next step, now
    Now,
    /// the call's result, which the client has at this time
    Done(Py<PyAny>, i64),
    /// the call's error, raised at the client at this time
    Fail(PyErr, i64),
}

/// Calls parked on the heap until their next step, by slot (the heap event carries the
/// slot); a freed slot is reused, so a long run keeps as many slots as calls in flight.
pub struct Parked<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Parked<T> {
    pub fn new() -> Self {
        Self { slots: Vec::new(), free: Vec::new() }
    }

    /// Park `item`; return its slot.
    pub fn park(&mut self, item: T) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(item);
                i
            }
            None => {
                self.slots.push(Some(item));
                self.slots.len() - 1
            }
        }
    }

    /// Take back the item parked at `slot` (None if there is none), freeing the slot.
    pub fn take(&mut self, slot: usize) -> Option<T> {
        let item = self.slots.get_mut(slot).and_then(Option::take);
        if item.is_some() {
            self.free.push(slot);
        }
        item
    }

    /// The parked items (for the garbage collector's traversal).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }
}
