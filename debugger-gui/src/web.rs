//! The debugger in a browser: the page's canvas runs the same [`DebuggerApp`], opened on the
//! log its server serves (the WebSocket at `/ws` of the page's own host).
//!
//! For tests and measurements the app publishes its state on `window` after every paint, as
//! a JSON string in `window.framelog_state` (frames, loading, the selected frame and its data,
//! the last paint's time, the WebAssembly memory), and selects the frame named in `window.framelog_select`
//! (`"WORKER:ID"`) when a test sets it.

use eframe::wasm_bindgen::{JsCast as _, JsValue};
use eframe::web_sys;
use formats::FrameKey;
use serde_json::json;

use crate::DebuggerApp;
use crate::feed::viewer::DataResult;
use crate::ui::data_panel::DataState;

/// The id of the page's canvas (`index.html`).
pub const CANVAS_ID: &str = "framelog_canvas";

/// Starts the app on the page's canvas, following the page's server's log. Problems (no
/// canvas, no WebGL) are written on the page.
pub fn start() {
    wasm_bindgen_futures::spawn_local(async {
        if let Err(e) = run().await {
            show_error(&format!("The framelog debugger could not start: {e:?}"));
        }
    });
}

async fn run() -> Result<(), JsValue> {
    let window = web_sys::window().ok_or("no window")?;
    let document = window.document().ok_or("no document")?;
    let canvas = document
        .get_element_by_id(CANVAS_ID)
        .ok_or("no canvas")?
        .dyn_into::<web_sys::HtmlCanvasElement>()?;
    let url = log_url(&window.location())?;
    eframe::WebRunner::new()
        .start(
            canvas,
            eframe::WebOptions::default(),
            Box::new(move |_cc| {
                let app = DebuggerApp::open_url(&url, "");
                Ok(Box::new(WebApp { app }))
            }),
        )
        .await
}

/// The log's WebSocket: `/ws` on the page's host, `wss` for an `https` page.
fn log_url(location: &web_sys::Location) -> Result<String, JsValue> {
    let scheme = if location.protocol()? == "https:" {
        "wss"
    } else {
        "ws"
    };
    Ok(format!("{scheme}://{}/ws", location.host()?))
}

fn show_error(text: &str) {
    if let Some(body) = web_sys::window()
        .and_then(|w| w.document())
        .and_then(|d| d.body())
    {
        body.set_text_content(Some(text));
    }
}

/// The app, with the test hooks around each paint.
struct WebApp {
    app: DebuggerApp,
}

impl eframe::App for WebApp {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        if let Some(window) = web_sys::window() {
            take_selection(&window, &mut self.app);
            eframe::App::ui(&mut self.app, ui, frame);
            publish(&window, &self.app, frame.info().cpu_usage);
        }
    }
}

/// Selects the frame a test named in `window.framelog_select`, once it is loaded.
fn take_selection(window: &web_sys::Window, app: &mut DebuggerApp) {
    let name = JsValue::from_str("framelog_select");
    let Some(wanted) = js_sys::Reflect::get(window, &name)
        .ok()
        .and_then(|v| v.as_string())
    else {
        return;
    };
    let key = wanted.split_once(':').and_then(|(w, id)| {
        Some(FrameKey {
            worker: w.trim().parse().ok()?,
            id: id.trim().parse().ok()?,
        })
    });
    let found = key.and_then(|k| app.model().and_then(|m| m.find(k)));
    if let Some(at) = found {
        app.select(Some(at));
        let _ = js_sys::Reflect::delete_property(window, &name);
    }
}

/// Writes the app's state to `window.framelog_state`; `frame_secs` is the previous paint's
/// CPU time as eframe measures it (the app's logic, taking in news, and painting).
fn publish(window: &web_sys::Window, app: &DebuggerApp, frame_secs: Option<f32>) {
    let status = app.ingest_status();
    let frames = app.model().map_or(0, |m| m.frame_count());
    let selected = app
        .selected()
        .and_then(|at| app.model().and_then(|m| m.info(at)))
        .map(|i| format!("{}:{}", i.key.worker, i.key.id));
    let (data, data_error) = match app.data_state() {
        DataState::Ready(_, DataResult::Found(doc)) => (
            Some(bson::Bson::Document(doc.clone()).into_relaxed_extjson()),
            None,
        ),
        DataState::Ready(_, DataResult::Error(e)) => (None, Some(e.clone())),
        _ => (None, None),
    };
    // Milliseconds from opening the log to `t`.
    let opened = app.opened_at();
    let since_opened =
        |t: Option<web_time::Instant>| Some(t?.duration_since(opened?).as_secs_f64() * 1e3);
    let data_ready = matches!(app.data_state(), DataState::Ready(..));
    let wasm_memory = eframe::wasm_bindgen::memory()
        .dyn_into::<js_sys::WebAssembly::Memory>()
        .ok()
        .and_then(|m| m.buffer().dyn_into::<js_sys::ArrayBuffer>().ok())
        .map_or(0.0, |b| b.byte_length() as f64);
    let state = json!({
        "frames": frames,
        "caught_up": status.caught_up,
        "finished": status.finished,
        // What the status bar says: a log no process writes any more, read to its end.
        "says_finished": app.is_finished(),
        "errors": status.errors,
        "waiting": status.waiting,
        "writers": status.writers,
        "first_frames_ms": since_opened(status.first_frames_at),
        "caught_up_ms": since_opened(status.caught_up_at),
        "asks_for_token": app.asks_for_token(),
        "selected": selected,
        "data_ready": data_ready,
        "data": data,
        "data_error": data_error,
        "ui_ms": app.ui_cpu_time().as_secs_f64() * 1e3,
        "frame_ms": frame_secs.map(|s| f64::from(s) * 1e3),
        "wasm_memory_bytes": wasm_memory,
    });
    let _ = js_sys::Reflect::set(
        window,
        &JsValue::from_str("framelog_state"),
        &JsValue::from_str(&state.to_string()),
    );
}
