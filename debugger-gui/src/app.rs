//! [`DebuggerApp`]: the whole window — menu and toolbar, flamegraph, frame-data panel,
//! contexts and statistics, status bar — driven by one `ui` call so tests can run it headless.

use parking_lot::MutexGuard;
use std::path::{Path, PathBuf};
use std::time::Duration;
use web_time::Instant;

use egui::{Color32, Key, RichText, TextEdit, Ui};
use formats::Category;

use crate::data_loader::DataLoader;
#[cfg(not(target_arch = "wasm32"))]
use crate::demo::Demo;
#[cfg(not(target_arch = "wasm32"))]
use crate::export_job::{ExportFormat, ExportJob};
use crate::ingest::{Ingest, IngestStatus};
#[cfg(not(target_arch = "wasm32"))]
use crate::listen::Listener;
use crate::model::search::{Matches, Pattern, SearchFrom};
use crate::model::{FrameInfo, FrameRef, Model};
#[cfg(not(target_arch = "wasm32"))]
use crate::recent::RecentLogs;
use crate::source::LogSource;
use crate::ui::aggregated::{self, AggregatedState, ScopeInput};
use crate::ui::compare::{self as compare_tab, ComparePanel};
use crate::ui::context_view::{self, ContextAction, ContextView};
use crate::ui::contexts::{self, ContextsPanel};
pub use crate::ui::data_panel::DataState;
use crate::ui::data_panel::{DataPanel, PanelAction};
use crate::ui::flamegraph::{self, FlameState};
use crate::ui::histogram::{self, HistogramPanel};
use crate::ui::messages_panel::{self, MessagesPanel};
use crate::ui::plot_tracks::{self, TracksState};
use crate::ui::search_bar::SearchBar;
use crate::ui::stats::{self, StatsPanel};
use crate::ui::{category_color, status_bar};

/// An open log: where it comes from, its ingest and its frame-data loader.
struct OpenLog {
    source: LogSource,
    ingest: Ingest,
    data: DataLoader,
    /// The server asked for a token and the window has asked the user for it.
    token_asked: std::cell::Cell<bool>,
}

impl OpenLog {
    fn dir(&self) -> Option<&Path> {
        self.source.dir()
    }
}

/// File > Open remote…: the server's address, and its token when it asks for one.
#[derive(Clone, Debug, Default)]
struct RemoteDialog {
    url: String,
    token: String,
    /// What the server said when it refused the window for want of a token.
    token_needed: Option<String>,
}

/// Which tab the bottom panel shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BottomTab {
    /// The contexts list.
    Contexts,
    /// The statistics table.
    Statistics,
    /// The duration histogram of one label.
    Histogram,
    /// The log's messages.
    Messages,
    /// The open log against a compared one (baseline).
    Compare,
    /// Connected programs (while listening).
    Processes,
}

/// What the central area shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CentralView {
    /// Frames on their threads over time.
    Timeline,
    /// Frames merged by call path (icicle: callers above callees).
    FlameGraph,
    /// One context's frames as one tree across threads.
    Context,
}

/// The debugger window's state.
pub struct DebuggerApp {
    log: Option<OpenLog>,
    view: CentralView,
    flame: FlameState,
    /// Whether the newly opened log was checked for live writers (Follow stays on only while
    /// the log is still growing).
    follow_checked: bool,
    aggregated: AggregatedState,
    context_view: ContextView,
    selected: Option<FrameRef>,
    selected_info: Option<FrameInfo>,
    data: DataPanel,
    search: SearchBar,
    contexts: ContextsPanel,
    stats: StatsPanel,
    histogram: HistogramPanel,
    messages_panel: MessagesPanel,
    /// The plot tracks under the timeline.
    tracks: TracksState,
    /// A second log to compare the open one with (the baseline), read once.
    compare: Option<(PathBuf, Ingest)>,
    compare_panel: ComparePanel,
    #[cfg(not(target_arch = "wasm32"))]
    /// The open dialog opens a baseline to compare with, not a log.
    open_for_compare: bool,
    #[cfg(not(target_arch = "wasm32"))]
    /// The native folder dialog, while it is open (on its own thread: it blocks).
    folder_pick: Option<std::sync::mpsc::Receiver<Option<PathBuf>>>,
    #[cfg(not(target_arch = "wasm32"))]
    /// Recently opened logs.
    recent: RecentLogs,
    tab: BottomTab,
    show_bottom: bool,
    show_data: bool,
    #[cfg(not(target_arch = "wasm32"))]
    open_dialog: Option<String>,
    /// The File > Open remote… dialog, while it is open.
    remote_dialog: Option<RemoteDialog>,
    /// The path box should take the keyboard focus (it was just opened).
    focus_path: bool,
    messages: Vec<String>,
    #[cfg(not(target_arch = "wasm32"))]
    demo: Option<Demo>,
    #[cfg(not(target_arch = "wasm32"))]
    listener: Option<Listener>,
    #[cfg(not(target_arch = "wasm32"))]
    /// The File > Listen… dialog's address box, while it is open.
    listen_dialog: Option<String>,
    #[cfg(not(target_arch = "wasm32"))]
    /// Asking what to do with the temporary log before quitting, while it asks.
    quit_dialog: Option<crate::ui::quit_dialog::QuitDialog>,
    #[cfg(not(target_arch = "wasm32"))]
    /// The window was told to close (File > Quit, or the temporary log settled).
    quitting: bool,
    #[cfg(not(target_arch = "wasm32"))]
    /// What became of the temporary log (once settled: the window may close).
    quit_note: Option<String>,
    #[cfg(not(target_arch = "wasm32"))]
    /// The last error of a Processes tab button.
    process_message: Option<String>,
    /// Limit statistics and contexts to the selected time range.
    limit_to_selection: bool,
    #[cfg(not(target_arch = "wasm32"))]
    /// The File > Export… dialog (format, output path), while it is open.
    export_dialog: Option<(ExportFormat, String)>,
    #[cfg(not(target_arch = "wasm32"))]
    /// The running export, and the last one's outcome.
    export: Option<ExportJob>,
    #[cfg(not(target_arch = "wasm32"))]
    export_note: Option<String>,
    ui_cpu: Duration,
    title: String,
    /// The open log is finished: no process writes it and it is read to its end.
    finished: bool,
    /// The Frame panel's width (the user's, remembered in `panel_file` across restarts).
    panel_width: f32,
    #[cfg(not(target_arch = "wasm32"))]
    /// Where the Frame panel's width is kept (next to the recent logs list).
    panel_file: Option<PathBuf>,
}

/// The Frame panel's width until the user drags it: Start and Thread fit on one line.
const PANEL_WIDTH: f32 = 460.0;

impl Default for DebuggerApp {
    fn default() -> Self {
        Self::new()
    }
}

impl DebuggerApp {
    /// A window with no log open (the user opens one from the menu or by dropping a folder).
    pub fn new() -> Self {
        Self {
            log: None,
            view: CentralView::Timeline,
            flame: FlameState::default(),
            follow_checked: false,
            aggregated: AggregatedState::default(),
            context_view: ContextView::default(),
            selected: None,
            selected_info: None,
            data: DataPanel::default(),
            search: SearchBar::default(),
            contexts: ContextsPanel::default(),
            stats: StatsPanel::default(),
            histogram: HistogramPanel::default(),
            messages_panel: MessagesPanel::default(),
            tracks: TracksState::default(),
            compare: None,
            compare_panel: ComparePanel::default(),
            #[cfg(not(target_arch = "wasm32"))]
            open_for_compare: false,
            #[cfg(not(target_arch = "wasm32"))]
            folder_pick: None,
            #[cfg(not(target_arch = "wasm32"))]
            recent: RecentLogs::default(),
            tab: BottomTab::Contexts,
            show_bottom: true,
            show_data: true,
            #[cfg(not(target_arch = "wasm32"))]
            open_dialog: None,
            remote_dialog: None,
            focus_path: false,
            messages: Vec::new(),
            #[cfg(not(target_arch = "wasm32"))]
            demo: None,
            #[cfg(not(target_arch = "wasm32"))]
            listener: None,
            #[cfg(not(target_arch = "wasm32"))]
            listen_dialog: None,
            #[cfg(not(target_arch = "wasm32"))]
            quit_dialog: None,
            #[cfg(not(target_arch = "wasm32"))]
            quitting: false,
            #[cfg(not(target_arch = "wasm32"))]
            quit_note: None,
            #[cfg(not(target_arch = "wasm32"))]
            process_message: None,
            limit_to_selection: true,
            #[cfg(not(target_arch = "wasm32"))]
            export_dialog: None,
            #[cfg(not(target_arch = "wasm32"))]
            export: None,
            #[cfg(not(target_arch = "wasm32"))]
            export_note: None,
            ui_cpu: Duration::ZERO,
            title: String::new(),
            finished: false,
            panel_width: PANEL_WIDTH,
            #[cfg(not(target_arch = "wasm32"))]
            panel_file: None,
        }
    }

    /// A window showing (and following) the log in `dir`. Problems are shown in the window.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open(dir: impl AsRef<Path>) -> Self {
        let mut app = Self::new();
        app.open_log(dir);
        app
    }

    /// A window following a freshly started demo workload.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn demo() -> Self {
        let mut app = Self::new();
        app.start_demo();
        app
    }

    /// A window recording the programs that connect to `addr` into `dir` (a temporary
    /// directory if `None`), and following that log.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn listen(addr: &str, dir: Option<&Path>, token: Option<String>) -> Self {
        let mut app = Self::new();
        app.start_listening(addr, dir, token);
        app
    }

    /// Starts listening on `addr` (see [`DebuggerApp::listen`]); a failure is shown.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn start_listening(&mut self, addr: &str, dir: Option<&Path>, token: Option<String>) {
        match Listener::start(addr, dir, token) {
            Ok(listener) => {
                let dir = listener.dir().to_owned();
                self.listener = Some(listener);
                self.open_log(&dir);
                self.tab = BottomTab::Processes;
                self.show_bottom = true;
            }
            Err(e) => self
                .messages
                .push(format!("Could not listen on {addr}: {e:#}")),
        }
    }

    /// The recording server, while the window listens.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn listener(&self) -> Option<&Listener> {
        self.listener.as_ref()
    }

    /// The bottom panel's tab.
    pub fn tab(&self) -> BottomTab {
        self.tab
    }

    /// Starts the demo workload and opens its log.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn start_demo(&mut self) {
        match Demo::start() {
            Ok(demo) => {
                let dir = demo.path();
                self.demo = Some(demo);
                self.open_log(dir);
            }
            Err(e) => self
                .messages
                .push(format!("Could not start the demo: {e:#}")),
        }
    }

    /// Opens (and follows) another log, replacing the current one.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_log(&mut self, dir: impl AsRef<Path>) {
        self.open_source(LogSource::Dir(dir.as_ref().to_owned()), "");
    }

    /// A window showing (and following) the log a server serves at `url` (`ws://HOST:PORT/ws`),
    /// presenting `token` (empty: none). Problems, and a refusal, are shown in the window.
    pub fn open_url(url: &str, token: &str) -> Self {
        let mut app = Self::new();
        app.open_remote(url, token);
        app
    }

    /// Opens (and follows) the log a server serves at `url`, replacing the current one.
    pub fn open_remote(&mut self, url: &str, token: &str) {
        self.open_source(LogSource::parse(url), token);
    }

    /// Opens (and follows) a log from a directory or a server, replacing the current one.
    pub fn open_source(&mut self, source: LogSource, token: &str) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let dir = source.dir();
            if self.demo.as_ref().is_some_and(|d| Some(d.dir()) != dir) {
                self.demo = None;
            }
            // Opening another log stops listening (the window follows one log at a time).
            if self.listener.as_ref().is_some_and(|l| Some(l.dir()) != dir) {
                self.listener = None;
                if self.tab == BottomTab::Processes {
                    self.tab = BottomTab::Contexts;
                }
            }
        }
        let ingest = match &source {
            #[cfg(not(target_arch = "wasm32"))]
            LogSource::Dir(dir) => Ingest::start(dir, true),
            #[cfg(target_arch = "wasm32")]
            LogSource::Dir(dir) => {
                self.messages.push(format!(
                    "{} is a log directory: the browser opens only served logs (ws://HOST:PORT/ws)",
                    dir.display()
                ));
                return;
            }
            LogSource::Remote(url) => Ingest::connect(url, token),
        };
        let data = DataLoader::for_log(&ingest);
        self.log = Some(OpenLog {
            source,
            ingest,
            data,
            token_asked: std::cell::Cell::new(false),
        });
        self.flame = FlameState::default();
        self.follow_checked = false;
        self.selected = None;
        self.selected_info = None;
        self.data.clear();
        self.search.clear();
        self.contexts = ContextsPanel::default();
        self.stats = StatsPanel::default();
        self.messages.clear();
        #[cfg(not(target_arch = "wasm32"))]
        let opened = self.log_source().cloned();
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(log) = opened
            && let Err(e) = self.recent.record(&log)
        {
            self.messages
                .push(format!("Could not save the recent logs list: {e}"));
        }
    }

    /// Keeps the recent logs list in `file` (loading what it holds); `None`: in memory only.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn set_recent_file(&mut self, file: Option<PathBuf>) {
        let current = self.log_source().cloned();
        self.panel_file = file.as_ref().map(|f| f.with_file_name("frame-panel-width"));
        if let Some(w) = self
            .panel_file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| t.trim().parse::<f32>().ok())
            .filter(|w| w.is_finite() && *w >= 200.0)
        {
            self.panel_width = w;
        }
        self.recent = RecentLogs::load(file);
        if let Some(log) = current {
            let _ = self.recent.record(&log);
        }
    }

    /// Recently opened logs (directories and URLs), newest first.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn recent_logs(&self) -> &[LogSource] {
        self.recent.paths()
    }

    /// Reads `dir` (once, not followed) as the baseline the open log is compared with: the
    /// Compare tab and the flame graph's difference colors.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn compare_with(&mut self, dir: impl AsRef<Path>) {
        let dir = dir.as_ref().to_owned();
        let ingest = Ingest::start(&dir, false);
        self.compare = Some((dir, ingest));
        self.compare_panel = ComparePanel::default();
        self.tab = BottomTab::Compare;
    }

    /// The compared log's model, if one is open.
    pub fn compare_model(&self) -> Option<MutexGuard<'_, Model>> {
        self.compare.as_ref().map(|(_, i)| i.model())
    }

    /// The open log's directory (`None` for a remote log).
    pub fn log_dir(&self) -> Option<&Path> {
        self.log.as_ref().and_then(OpenLog::dir)
    }

    /// Where the open log comes from.
    pub fn log_source(&self) -> Option<&LogSource> {
        self.log.as_ref().map(|l| &l.source)
    }

    /// Locks and returns the model (None if no log is open).
    pub fn model(&self) -> Option<MutexGuard<'_, Model>> {
        self.log.as_ref().map(|l| l.ingest.model())
    }

    /// When the open log was opened.
    pub fn opened_at(&self) -> Option<Instant> {
        self.log.as_ref().map(|l| l.ingest.started())
    }

    /// The ingest thread's status (default if no log is open).
    pub fn ingest_status(&self) -> IngestStatus {
        self.log
            .as_ref()
            .map(|l| l.ingest.status())
            .unwrap_or_default()
    }

    /// Blocks until the open log has been read to its current end (for tests and tools).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait_loaded(&self, timeout: Duration) -> bool {
        self.log
            .as_ref()
            .is_some_and(|l| l.ingest.wait_caught_up(timeout))
    }

    /// The flamegraph's view state.
    pub fn flame(&self) -> &FlameState {
        &self.flame
    }

    /// The flamegraph's view state, mutable (zoom, follow).
    pub fn flame_mut(&mut self) -> &mut FlameState {
        &mut self.flame
    }

    /// The selected frame.
    pub fn selected(&self) -> Option<FrameRef> {
        self.selected
    }

    /// Selects a frame (its data is requested from the data thread).
    pub fn select(&mut self, at: Option<FrameRef>) {
        self.selected = at;
        self.selected_info = None;
        if at.is_none() {
            self.data.clear();
        }
    }

    /// The selected frame's data, as far as it has arrived.
    pub fn data_state(&self) -> &DataState {
        self.data.state()
    }

    /// The search text.
    pub fn search_text(&self) -> &str {
        self.search.text()
    }

    /// Sets the search text (as if typed).
    pub fn set_search(&mut self, text: &str) {
        self.search.set_text(text);
    }

    /// The current search result, if a pattern is active.
    pub fn search_matches(&self) -> Option<&Matches> {
        self.search.matches()
    }

    /// True while the window asks for the token a server wants (File > Open remote…).
    pub fn asks_for_token(&self) -> bool {
        self.remote_dialog
            .as_ref()
            .is_some_and(|d| d.token_needed.is_some())
    }

    /// CPU time the last `ui` call took.
    pub fn ui_cpu_time(&self) -> Duration {
        self.ui_cpu
    }

    /// Problems to show: the app's own and the ingest thread's.
    pub fn problems(&self) -> Vec<String> {
        #[cfg_attr(target_arch = "wasm32", allow(unused_mut))]
        let mut v = self.messages.clone();
        #[cfg(not(target_arch = "wasm32"))]
        v.extend(self.demo.as_ref().and_then(Demo::error));
        if let Some(l) = &self.log {
            v.extend(l.ingest.status().errors);
        }
        v
    }

    /// Draws the whole window into `ui` and handles its input.
    pub fn ui(&mut self, ui: &mut Ui) {
        let t0 = Instant::now();
        let ctx = ui.ctx().clone();
        if let Some(l) = &self.log {
            l.ingest.set_repaint(&ctx);
            l.data.set_repaint(&ctx);
            for (key, result) in l.data.poll() {
                self.data.answer(key, result);
            }
        }
        #[cfg(not(target_arch = "wasm32"))]
        self.handle_dropped_files(ui);
        let status = self.ingest_status();
        crate::ui::set_loading(
            &ctx,
            self.log.is_some() && !status.caught_up && !status.finished,
        );

        let log = self.log.take();
        {
            let guard = log.as_ref().map(|l| l.ingest.model());
            let empty = Model::new();
            let model: &Model = guard.as_deref().unwrap_or(&empty);
            if !self.follow_checked && status.caught_up && model.frame_count() > 0 {
                self.follow_checked = true;
                // A finished log (no process writing it; a listening window's log always
                // has its server) opens paused: its first zoom stays where the user zooms.
                // A remote log's writers are the server's to say.
                let writing = |l: &OpenLog| match (&status.writers, l.dir()) {
                    (Some(writers), _) => !writers.is_empty(),
                    #[cfg(not(target_arch = "wasm32"))]
                    (None, Some(dir)) => (0..=u8::MAX).any(|w| {
                        !model.worker(w).name.is_empty()
                            && matches!(framelog::is_writing(dir, w), Ok(true))
                    }),
                    _ => false,
                };
                #[cfg(not(target_arch = "wasm32"))]
                let listening = self.listener.is_some();
                #[cfg(target_arch = "wasm32")]
                let listening = false;
                if let Some(l) = &log
                    && !listening
                    && !writing(l)
                {
                    // Finished: shown whole, and said so (not "Following").
                    self.flame.set_follow(false);
                    self.flame.zoom_to_fit();
                    self.finished = true;
                }
            }
            self.search.update(model);
            self.update_selection(model, log.as_ref());

            egui::Panel::top("menu").show(ui, |ui| {
                self.menu_bar(ui, log.as_ref().and_then(OpenLog::dir));
                self.toolbar(ui, model);
            });
            egui::Panel::bottom("status").show(ui, |ui| {
                let path = log
                    .as_ref()
                    .map_or_else(|| "no log open".to_owned(), |l| l.source.to_string());
                #[cfg(not(target_arch = "wasm32"))]
                let temporary = self
                    .listener
                    .as_ref()
                    .is_some_and(|l| l.temp_dir().is_some());
                #[cfg(target_arch = "wasm32")]
                let temporary = false;
                let info = status_bar::StatusInfo {
                    frames: model.frame_count(),
                    open: model.open_count(),
                    cut: model.cut_count(),
                    dropped: model.dropped(),
                    following: self.is_following(),
                    finished: self.finished || status.finished,
                    ingest: &status,
                    path: &path,
                    temporary,
                    parents_inferred: model.parents_inferred(),
                };
                if status_bar::show(ui, &info) {
                    self.toggle_follow();
                }
            });
            if self.show_data {
                let panel = egui::Panel::right("frame-data")
                    .resizable(true)
                    .default_size(self.panel_width)
                    .min_size(220.0)
                    .show(ui, |ui| {
                        // The panel keeps the width the user gave it: long values wrap
                        // instead of widening it (and rescaling the timeline under the pointer).
                        // It fills that width too: short content does not shrink it (the
                        // panel's width follows its content's otherwise).
                        ui.set_max_width(ui.available_width());
                        ui.set_min_width(ui.available_width());
                        ui.style_mut().wrap_mode = Some(egui::TextWrapMode::Wrap);
                        let info = self.selected_info.as_ref();
                        match self.data.ui(ui, model, info) {
                            Some(PanelAction::Zoom(start, end)) => self.flame.zoom_to(start, end),
                            Some(PanelAction::Select(at)) => self.select_and_reveal(model, at),
                            Some(PanelAction::OpenContext(at)) => self.open_context(at),
                            None => {}
                        }
                    });
                self.remember_panel_width(ui, panel.response.rect.width());
            }
            if self.show_bottom {
                egui::Panel::bottom("bottom-tabs")
                    .resizable(true)
                    .default_size(220.0)
                    .min_size(80.0)
                    .show(ui, |ui| {
                        // Every tab gets exactly the height the user gave the panel: switching
                        // tabs does not move the timeline, and a tab whose content wants
                        // more (a long table) is clipped, never holding the panel open when
                        // the user drags it smaller.
                        let rect = ui.available_rect_before_wrap();
                        let mut tab = ui.new_child(egui::UiBuilder::new().max_rect(rect));
                        tab.set_clip_rect(rect.intersect(ui.clip_rect()));
                        self.bottom_panel(&mut tab, model);
                        ui.allocate_rect(rect, egui::Sense::hover());
                    });
            }
            egui::CentralPanel::default().show(ui, |ui| {
                self.problems_banner(ui, log.as_ref());
                #[cfg(not(target_arch = "wasm32"))]
                if let Some(note) = &self.export_note {
                    let mut dismiss = false;
                    ui.horizontal(|ui| {
                        ui.label(RichText::new(note.as_str()).strong());
                        // Words, not a symbol: the default fonts have no glyph for "✕".
                        dismiss = ui.small_button("Dismiss").clicked();
                    });
                    if dismiss {
                        self.export_note = None;
                    }
                }
                if log.is_none() {
                    ui.vertical_centered(|ui| {
                        ui.add_space(60.0);
                        ui.heading("No log open");
                        #[cfg(not(target_arch = "wasm32"))]
                        ui.label(
                            "Open a log directory from File > Open log…, or drop a folder here; a served log from File > Open remote….",
                        );
                        #[cfg(target_arch = "wasm32")]
                        ui.label("Open a served log from File > Open remote….");
                    });
                    return;
                }
                if !status.caught_up && !status.finished && status.total_bytes > 0 {
                    // Not animated: an animated bar asks egui for a frame after every frame,
                    // and those paints took the load a third of the machine. It moves with
                    // the ingest's own repaints (a few a second) instead.
                    ui.add(
                        egui::ProgressBar::new(status.progress())
                            .text(format!(
                                "Loading… {} of {} MiB",
                                status.bytes_read >> 20,
                                status.total_bytes >> 20
                            )),
                    );
                }
                ui.horizontal(|ui| {
                    ui.selectable_value(&mut self.view, CentralView::Timeline, "Timeline");
                    ui.selectable_value(&mut self.view, CentralView::FlameGraph, "Flame graph");
                    if self.context_view.is_open() {
                        ui.selectable_value(&mut self.view, CentralView::Context, "Context");
                    }
                    self.selection_bar(ui, model);
                });
                match self.view {
                    CentralView::Timeline => {
                        let matches = self.search.matches();
                        let out = plot_tracks::timeline(
                            ui,
                            &mut self.flame,
                            &mut self.tracks,
                            model,
                            matches,
                            self.selected,
                        );
                        if let Some(sel) = out.clicked {
                            self.select(sel);
                        }
                    }
                    CentralView::Context => {
                        match context_view::show(ui, &mut self.context_view, model, self.selected)
                        {
                            Some(ContextAction::Select(at)) => {
                                self.select(Some(at));
                            }
                            Some(ContextAction::Close) => {
                                self.context_view.close();
                                self.view = CentralView::Timeline;
                            }
                            None => {}
                        }
                    }
                    CentralView::FlameGraph => {
                        let input = self.scope_input(model);
                        let base = self.compare.as_ref().map(|(_, i)| i.model());
                        if let Some(label) = aggregated::show(
                            ui,
                            &mut self.aggregated,
                            model,
                            &input,
                            base.as_deref(),
                        ) {
                            self.search.set_text(&Pattern::exact_text(&label));
                            self.view = CentralView::Timeline;
                        }
                    }
                }
            });
            #[cfg(not(target_arch = "wasm32"))]
            {
                self.quit_dialog(&ctx);
                self.open_dialog(&ctx);
                self.listen_dialog(&ctx);
                self.export_dialog(&ctx, log.as_ref().and_then(OpenLog::dir));
            }
            self.remote_dialog(&ctx, log.as_ref());
        }
        // A log opened while drawing (File > Open log…, Open demo, a dropped folder) replaces
        // the one taken out above, which is dropped (its threads stop).
        if self.log.is_none() {
            self.log = log;
        }
        self.ui_cpu = t0.elapsed();
    }

    /// The selected range: its span, and whether the panels are limited to it.
    fn selection_bar(&mut self, ui: &mut Ui, model: &Model) {
        let Some((a, b)) = self.flame.selection else {
            return;
        };
        ui.separator();
        let base = model.time_range().map_or(a, |r| r.0);
        ui.label(format!(
            "Selected +{} … +{} ({})",
            crate::timefmt::duration(a.saturating_sub(base) as f64),
            crate::timefmt::duration(b.saturating_sub(base) as f64),
            crate::timefmt::duration((b - a) as f64)
        ));
        ui.checkbox(
            &mut self.limit_to_selection,
            "Limit statistics and contexts to it",
        );
        if ui.button("Zoom to it").clicked() {
            self.flame.zoom_to(a, b);
        }
        if ui
            .button("Clear")
            .on_hover_text("Clear the selection (Esc)")
            .clicked()
        {
            self.flame.selection = None;
        }
    }

    /// Keeps the Frame panel's width the user gave it (once the drag is over) for the next
    /// start.
    fn remember_panel_width(&mut self, ui: &Ui, width: f32) {
        // Only a width the user dragged to (kept as the drag ends), not one the window
        // imposed (a narrow window shrinks the panel for now).
        let drag_ended = ui.input(|i| i.pointer.any_released());
        if (width - self.panel_width).abs() < 1.0 || !drag_ended {
            return;
        }
        self.panel_width = width;
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(f) = &self.panel_file {
            let _ = std::fs::write(f, format!("{width:.0}\n"));
        }
    }

    /// The Frame panel's width (the user's once dragged).
    pub fn panel_width(&self) -> f32 {
        self.panel_width
    }

    /// The height of the category legend's text as last drawn (points).
    pub fn legend_text_height(ctx: &egui::Context) -> Option<f32> {
        ctx.data(|d| d.get_temp(egui::Id::unique(LEGEND_TEXT_H)))
    }

    /// Whether the open log is finished (no process writes it, read to its end).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The central area's view.
    pub fn view(&self) -> CentralView {
        self.view
    }

    /// Switches the central area's view.
    pub fn set_view(&mut self, view: CentralView) {
        self.view = view;
    }

    /// The context view's state.
    pub fn context_view(&self) -> &ContextView {
        &self.context_view
    }

    /// Shows the context of frame `at` as a tree (the context view).
    pub fn open_context(&mut self, at: FrameRef) {
        self.context_view.open(at);
        self.view = CentralView::Context;
    }

    /// Selects frame `at` and brings it into view on the timeline.
    pub fn select_and_reveal(&mut self, model: &Model, at: FrameRef) {
        self.select(Some(at));
        if let Some(info) = model.info(at) {
            self.reveal(model, info);
        }
    }

    /// Shows message `i` on the timeline: its frame selected and revealed (its data panel
    /// shown), or, written outside frames, the time around it.
    pub fn jump_to_message(&mut self, model: &Model, i: u32) {
        let Some(e) = model.messages().get(i).copied() else {
            return;
        };
        self.view = CentralView::Timeline;
        match model.message_frame(&e) {
            Some(at) => {
                self.select_and_reveal(model, at);
                self.show_data = true;
            }
            None => self
                .flame
                .zoom_to(e.time.saturating_sub(500_000), e.time + 500_000),
        }
    }

    /// The Messages tab's state (filter, the message clicked last).
    pub fn messages_panel(&self) -> &MessagesPanel {
        &self.messages_panel
    }

    /// The Messages tab's state, mutable.
    pub fn messages_panel_mut(&mut self) -> &mut MessagesPanel {
        &mut self.messages_panel
    }

    /// What the plot tracks drew and point at.
    pub fn plot_tracks(&self) -> &TracksState {
        &self.tracks
    }

    /// Switches the bottom panel's tab.
    pub fn set_tab(&mut self, tab: BottomTab) {
        self.tab = tab;
    }

    /// The aggregated flame graph's state.
    pub fn aggregated(&self) -> &AggregatedState {
        &self.aggregated
    }

    /// The timeline's visible time range (ns since the epoch), once it has shown frames.
    fn view_range(&self) -> Option<(u64, u64)> {
        self.flame.base.map(|b| {
            let from = b as f64 + self.flame.start.max(0.0);
            (from as u64, (from + self.flame.width.max(1.0)) as u64)
        })
    }

    /// Where Next/Prev start: the selected frame, else the visible range.
    fn search_from(&self) -> SearchFrom {
        match (self.selected, self.view_range()) {
            (Some(at), _) => SearchFrom::Frame(at),
            (None, Some((t0, t1))) => SearchFrom::View(t0, t1),
            (None, None) => SearchFrom::Start,
        }
    }

    /// What the aggregated flame graph's scope choices resolve to now.
    fn scope_input(&self, model: &Model) -> ScopeInput {
        let range = self.view_range();
        let context = self.selected_info.as_ref().map(|i| {
            // The context root is the first node of the frame's call path.
            let tree = model.call_tree();
            let node = model.row(i.at).node(i.at.index as usize);
            let root = tree.path(node).first().map(|&n| tree.label(n));
            ((i.key.worker, i.context), root)
        });
        ScopeInput {
            range,
            selection: self.flame.selection,
            context,
        }
    }

    /// Whether the view keeps up with the log (following its newest time, or fitted to all
    /// of it, which grows with it).
    pub fn is_following(&self) -> bool {
        self.flame.follow || self.flame.fitted
    }

    fn toggle_follow(&mut self) {
        if self.is_following() {
            // Pause: the view stays where it is now.
            self.flame.set_follow(false);
            self.flame.fitted = false;
        } else {
            self.flame.set_follow(true);
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn handle_dropped_files(&mut self, ui: &Ui) {
        let dropped: Vec<PathBuf> = ui.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_owned())
                .collect()
        });
        if let Some(p) = dropped.first() {
            let dir = if p.is_dir() {
                p.clone()
            } else {
                p.parent().map_or_else(|| p.clone(), Path::to_owned)
            };
            self.open_log(dir);
        }
    }

    fn update_selection(&mut self, model: &Model, log: Option<&OpenLog>) {
        let Some(at) = self.selected else {
            self.selected_info = None;
            return;
        };
        let info = model.info(at);
        if let (Some(i), Some(l)) = (&info, log) {
            self.data.want(i.key, &l.data);
        }
        if self.selected_info.is_none()
            && let Some(i) = &info
        {
            // Newly selected: the histogram shows its label.
            self.histogram.label = Some(model.label_of(i.at));
        }
        self.selected_info = info;
    }

    #[cfg_attr(target_arch = "wasm32", allow(unused_variables))]
    fn menu_bar(&mut self, ui: &mut Ui, current: Option<&Path>) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                #[cfg(not(target_arch = "wasm32"))]
                {
                    if ui.button("Open log…").clicked() {
                        // `self.log` is taken out while the window is drawn: the caller passes it.
                        self.open_dialog =
                            Some(current.map(|d| d.display().to_string()).unwrap_or_default());
                        self.open_for_compare = false;
                        self.focus_path = true;
                        ui.close();
                    }
                }
                if ui
                    .button("Open remote…")
                    .on_hover_text(
                        "A log served by `framelog view --http` or `framelog serve --http`",
                    )
                    .clicked()
                {
                    self.remote_dialog = Some(RemoteDialog::default());
                    self.focus_path = true;
                    ui.close();
                }
                #[cfg(not(target_arch = "wasm32"))]
                self.desktop_file_menu(ui, current);
            });
            ui.menu_button("View", |ui| {
                ui.checkbox(&mut self.show_data, "Frame data panel");
                ui.checkbox(&mut self.show_bottom, "Contexts and statistics");
                ui.checkbox(&mut self.flame.wheel_zooms, "Wheel zooms (like Tracy)");
                if ui.button("Zoom to fit").clicked() {
                    self.flame.zoom_to_fit();
                    ui.close();
                }
            });
            ui.menu_button("Help", |ui| {
                ui.label(
                    "Zoom: ctrl/cmd + wheel (the wheel with View > Wheel zooms), pinch, W/S or +/-",
                );
                ui.label(
                    "Pan: drag, wheel (shift + wheel with Wheel zooms), A/D or the arrow keys",
                );
                ui.label("Follow: the last seconds of the log (set how many next to Follow)");
                ui.label("Zoom to fit: F or Home");
                ui.label("Double-click a frame: zoom to it");
                ui.label("Search: Enter = next, Shift+Enter = previous");
            });
        });
    }

    /// The File menu's desktop items: recent logs, the demo, comparing, exporting,
    /// listening and quitting.
    #[cfg(not(target_arch = "wasm32"))]
    fn desktop_file_menu(&mut self, ui: &mut Ui, current: Option<&Path>) {
        let recent: Vec<LogSource> = self.recent.paths().to_vec();
        ui.add_enabled_ui(!recent.is_empty(), |ui| {
            ui.menu_button("Open recent", |ui| {
                for log in recent {
                    if ui.button(log.to_string()).clicked() {
                        self.open_source(log, "");
                        ui.close();
                    }
                }
            });
        });
        if ui.button("Open demo").clicked() {
            self.start_demo();
            ui.close();
        }
        if ui
            .button("Compare with log…")
            .on_hover_text("Read another log as a baseline: per-label changes, and the flame graph's difference")
            .clicked()
        {
            self.open_dialog = Some(String::new());
            self.open_for_compare = true;
            self.focus_path = true;
            ui.close();
        }
        if ui
            .add_enabled(current.is_some(), egui::Button::new("Export…"))
            .on_hover_text("Write the log for Perfetto UI or speedscope")
            .clicked()
            && let Some(dir) = current
        {
            let f = ExportFormat::Chrome;
            self.export_dialog = Some((f, f.default_path(dir).display().to_string()));
            ui.close();
        }
        if ui
            .button("Listen…")
            .on_hover_text("Record programs that connect with FRAMELOG_CONNECT")
            .clicked()
        {
            self.listen_dialog = Some("127.0.0.1:7878".to_owned());
            ui.close();
        }
        ui.separator();
        if ui.button("Quit").clicked() {
            self.quit(ui.ctx());
            ui.close();
        }
    }

    fn toolbar(&mut self, ui: &mut Ui, model: &Model) {
        ui.horizontal(|ui| {
            let follow = self.flame.follow;
            if ui
                .selectable_label(follow, "⟲ Follow")
                .on_hover_text("Keep the newest time in view (scrolling back pauses it)")
                .clicked()
            {
                self.toggle_follow();
            }
            let mut secs = self.flame.follow_window / 1e9;
            if ui
                .add(
                    egui::DragValue::new(&mut secs)
                        .range(0.001..=3600.0)
                        .speed(0.1)
                        .max_decimals(3)
                        .prefix("last ")
                        .suffix(" s"),
                )
                .on_hover_text("How much of the newest time Follow shows")
                .changed()
            {
                self.flame.follow_window = secs * 1e9;
            }
            if ui
                .button("⛶ Zoom to fit")
                .on_hover_text("Show the whole log (F)")
                .clicked()
            {
                self.flame.zoom_to_fit();
            }
            ui.separator();
            if let Some(backward) = self.search.ui(ui)
                && let Some(m) = self.search.matches()
                && let Some(at) = model.next_match(m, self.search_from(), backward)
            {
                self.select(Some(at));
                if let Some(info) = model.info(at) {
                    self.reveal(model, info);
                }
            }
            ui.separator();
            ui.checkbox(&mut self.flame.wheel_zooms, "Wheel zooms")
                .on_hover_text(
                    "Tracy's wheel: the wheel zooms around the pointer; shift + wheel pans",
                );
            ui.label(
                RichText::new(if self.flame.wheel_zooms {
                    "wheel: zoom · drag: pan"
                } else {
                    "ctrl + wheel: zoom · wheel, drag: pan"
                })
                .weak(),
            );
        });
        ui.horizontal_wrapped(legend);
    }

    /// Brings a frame into view: centered, zoomed so it takes a quarter of the view (wide
    /// enough to be drawn as itself, never inside a merged box, with context on both sides),
    /// its lane scrolled to.
    fn reveal(&mut self, model: &Model, info: FrameInfo) {
        let dur = info.duration.max(1) as f64;
        let width = (dur * 4.0).max(1_000.0);
        let center = info.start as f64 + dur / 2.0;
        let start = (center - width / 2.0).max(0.0) as u64;
        self.flame.zoom_to(start, start + width as u64);
        // Expand its lane and scroll it into view.
        self.flame.collapsed.remove(&info.at.lane);
        let (lanes, _) = flamegraph::layout(model, &self.flame.collapsed);
        if let Some(&(_, y, _)) = lanes.iter().find(|l| l.0 == info.at.lane) {
            let row_y = y + flamegraph::LANE_HEADER_H + info.at.row as f32 * flamegraph::ROW_H;
            self.flame.scroll_y = (row_y - 60.0).max(0.0);
        }
    }

    fn problems_banner(&mut self, ui: &mut Ui, log: Option<&OpenLog>) {
        let mut problems = self.messages.clone();
        #[cfg(not(target_arch = "wasm32"))]
        problems.extend(self.demo.as_ref().and_then(Demo::error));
        if let Some(l) = log {
            let status = l.ingest.status();
            problems.extend(status.errors);
            if let Some(note) = status.waiting {
                // Not a problem: said plainly, without the warning colours.
                ui.label(RichText::new(note).weak());
            }
            if status.pruned_segments > 0 {
                ui.label(
                    RichText::new(format!(
                        "Retention deleted {} of this log's oldest segments before they were \
                         read: the log now starts later than it did.",
                        status.pruned_segments
                    ))
                    .weak(),
                );
            }
        }
        for p in problems.iter().rev().take(3) {
            egui::Frame::new()
                .fill(Color32::from_rgb(90, 30, 30))
                .inner_margin(6.0)
                .corner_radius(4.0)
                .show(ui, |ui| {
                    ui.label(RichText::new(format!("⚠ {p}")).color(Color32::WHITE));
                });
        }
    }

    fn bottom_panel(&mut self, ui: &mut Ui, model: &Model) {
        let limit = self.flame.selection.filter(|_| self.limit_to_selection);
        self.stats.range = limit;
        self.contexts.query.range = limit;
        self.histogram.range = limit;
        ui.horizontal(|ui| {
            ui.selectable_value(&mut self.tab, BottomTab::Contexts, "Contexts");
            ui.selectable_value(&mut self.tab, BottomTab::Statistics, "Statistics");
            ui.selectable_value(&mut self.tab, BottomTab::Histogram, "Histogram");
            if !model.messages().is_empty() || self.tab == BottomTab::Messages {
                ui.selectable_value(&mut self.tab, BottomTab::Messages, "Messages");
            }
            if self.compare.is_some() {
                ui.selectable_value(&mut self.tab, BottomTab::Compare, "Compare");
            }
            #[cfg(not(target_arch = "wasm32"))]
            if self.listener.is_some() {
                ui.selectable_value(&mut self.tab, BottomTab::Processes, "Processes");
            }
        });
        ui.separator();
        match self.tab {
            #[cfg(not(target_arch = "wasm32"))]
            BottomTab::Processes => match &mut self.listener {
                Some(l) => crate::ui::processes::show(ui, l, &mut self.process_message),
                None => self.tab = BottomTab::Contexts,
            },
            #[cfg(target_arch = "wasm32")]
            BottomTab::Processes => self.tab = BottomTab::Contexts,
            BottomTab::Contexts => {
                let picked = contexts::show(ui, &mut self.contexts, model);
                if let Some(root) = self.contexts.open_tree.take() {
                    self.open_context(root);
                }
                if let Some(row) = picked {
                    self.select(Some(row.root));
                    self.flame
                        .zoom_to(row.start, row.start + row.duration.max(1));
                    if let Some(info) = model.info(row.root) {
                        self.reveal(model, info);
                        self.flame
                            .zoom_to(row.start, row.start + row.duration.max(1));
                    }
                }
            }
            BottomTab::Statistics => {
                if let Some(label) = stats::show(ui, &mut self.stats, model) {
                    self.search.set_text(&Pattern::exact_text(&label));
                    self.histogram.label = model.labels().get(&label);
                }
            }
            BottomTab::Compare => match &self.compare {
                Some((dir, ingest)) => {
                    let name = dir.display().to_string();
                    let status = ingest.status();
                    if let Some(e) = status.errors.last() {
                        ui.colored_label(Color32::from_rgb(255, 120, 60), format!("⚠ {e}"));
                    }
                    let base = ingest.model();
                    compare_tab::show(ui, &mut self.compare_panel, &base, model, &name);
                }
                None => self.tab = BottomTab::Contexts,
            },
            BottomTab::Messages => {
                if let Some(i) = messages_panel::show(ui, &mut self.messages_panel, model) {
                    self.jump_to_message(model, i);
                }
            }
            BottomTab::Histogram => {
                if let Some(at) = histogram::show(ui, &mut self.histogram, model) {
                    self.select(Some(at));
                    if let Some(info) = model.info(at) {
                        self.reveal(model, info);
                    }
                }
            }
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn open_dialog(&mut self, ctx: &egui::Context) {
        let Some(mut path) = self.open_dialog.take() else {
            return;
        };
        let mut open = true;
        let mut chosen = None;
        let mut cancel = false;
        let title = if self.open_for_compare {
            "Compare with log"
        } else {
            "Open log"
        };
        egui::Window::new(title)
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label("Log directory (holds frames-NNNNNN.framelog files):");
                let r = ui.add(TextEdit::singleline(&mut path).desired_width(420.0));
                let r = r.accessible_name("Log directory");
                if std::mem::take(&mut self.focus_path) {
                    r.request_focus();
                }
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                ui.horizontal(|ui| {
                    if ui.button("Open").clicked() || enter {
                        chosen = Some(PathBuf::from(path.trim()));
                    }
                    let picking = self.folder_pick.is_some();
                    if ui
                        .add_enabled(!picking, egui::Button::new("Browse…"))
                        .on_hover_text("Choose the folder in your desktop's file dialog")
                        .clicked()
                    {
                        self.folder_pick = Some(pick_folder(title));
                    }
                    if picking {
                        ui.spinner();
                    }
                    if ui.button("Cancel").clicked() {
                        cancel = true;
                    }
                });
                if let Some(rx) = &self.folder_pick {
                    match rx.try_recv() {
                        Ok(Some(p)) => {
                            chosen = Some(p);
                            self.folder_pick = None;
                        }
                        // Cancelled, or no dialog on this desktop: the path box remains.
                        Ok(None) | Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                            self.folder_pick = None;
                        }
                        Err(std::sync::mpsc::TryRecvError::Empty) => {
                            ui.ctx().request_repaint_after(Duration::from_millis(100));
                        }
                    }
                }
                if self.recent.dirs().next().is_some() {
                    ui.separator();
                    ui.label("Recent logs:");
                    for p in self.recent.dirs() {
                        if ui.link(p.display().to_string()).clicked() {
                            chosen = Some(p.to_owned());
                        }
                    }
                }
                ui.label(
                    RichText::new("Tip: you can also drop a log folder on the window.").weak(),
                );
            });
        if let Some(p) = chosen {
            if self.open_for_compare {
                self.compare_with(p);
            } else {
                self.open_log(p);
            }
        } else if open && !cancel {
            self.open_dialog = Some(path);
        }
    }
}

/// Opens the desktop's folder dialog on its own thread (it blocks until closed); the
/// receiver gets the chosen folder, or `None` if cancelled or no dialog is available.
#[cfg(not(target_arch = "wasm32"))]
fn pick_folder(title: &str) -> std::sync::mpsc::Receiver<Option<PathBuf>> {
    let (tx, rx) = std::sync::mpsc::channel();
    let title = title.to_owned();
    std::thread::spawn(move || {
        let _ = tx.send(rfd::FileDialog::new().set_title(title).pick_folder());
    });
    rx
}

impl DebuggerApp {
    /// The running or last export: (output path, outcome so far: None while running).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn export_state(&self) -> Option<(&Path, Option<&str>)> {
        self.export
            .as_ref()
            .map(|j| (j.path.as_path(), self.export_note.as_deref()))
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn export_dialog(&mut self, ctx: &egui::Context, log: Option<&Path>) {
        if let Some(job) = &mut self.export
            && let Some(outcome) = job.poll()
        {
            self.export_note = Some(match outcome {
                Ok(s) => format!(
                    "Exported {} frames to {} ({} on async tracks)",
                    s.frames,
                    job.path.display(),
                    s.async_frames
                ),
                Err(e) => format!("Export failed: {e}"),
            });
            ctx.request_repaint();
        }
        if self.export.as_ref().is_some_and(ExportJob::running) {
            ctx.request_repaint_after(Duration::from_millis(100));
        }
        let Some((mut format, mut path)) = self.export_dialog.take() else {
            return;
        };
        let Some(dir) = log else {
            return;
        };
        let mut open = true;
        let (mut go, mut cancel) = (false, false);
        egui::Window::new("Export log")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.horizontal(|ui| {
                    for (f, name) in [
                        (
                            ExportFormat::Chrome,
                            "Chrome JSON (Perfetto, chrome://tracing)",
                        ),
                        (ExportFormat::Speedscope, "speedscope"),
                    ] {
                        if ui.selectable_label(format == f, name).clicked() && format != f {
                            format = f;
                            path = f.default_path(dir).display().to_string();
                        }
                    }
                });
                ui.add(TextEdit::singleline(&mut path).desired_width(420.0))
                    .accessible_name("Export file");
                ui.horizontal(|ui| {
                    go = ui.button("Export").clicked();
                    cancel = ui.button("Cancel").clicked();
                });
            });
        if go {
            self.export_note = None;
            self.export = Some(ExportJob::start(dir, Path::new(path.trim()), format));
        } else if open && !cancel {
            self.export_dialog = Some((format, path));
        }
    }

    fn remote_dialog(&mut self, ctx: &egui::Context, log: Option<&OpenLog>) {
        // The server refused the open log for want of a token: ask for it (once per refusal).
        if let Some(l) = log
            && !l.token_asked.get()
            && let Some(said) = l.ingest.status().needs_token
        {
            l.token_asked.set(true);
            self.remote_dialog = Some(RemoteDialog {
                url: l.source.url().unwrap_or_default().to_owned(),
                token: String::new(),
                token_needed: Some(said),
            });
            self.focus_path = true;
        }
        let Some(mut d) = self.remote_dialog.take() else {
            return;
        };
        let mut open = true;
        let (mut go, mut cancel) = (false, false);
        egui::Window::new("Open remote log")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label(
                    "Server address (the http://HOST:PORT/ a server prints, or ws://HOST:PORT/ws):",
                );
                let r = ui
                    .add(TextEdit::singleline(&mut d.url).desired_width(420.0))
                    .accessible_name("Server address");
                let focus = std::mem::take(&mut self.focus_path);
                if focus && d.token_needed.is_none() {
                    r.request_focus();
                }
                let mut enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                if let Some(said) = &d.token_needed {
                    ui.colored_label(
                        Color32::from_rgb(255, 120, 60),
                        format!("The server asks for a token: {said}"),
                    );
                    let r = ui
                        .add(
                            TextEdit::singleline(&mut d.token)
                                .password(true)
                                .desired_width(260.0),
                        )
                        .accessible_name("Token");
                    if focus {
                        r.request_focus();
                    }
                    enter |= r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                }
                ui.horizontal(|ui| {
                    go = ui.button("Connect").clicked() || enter;
                    cancel = ui.button("Cancel").clicked();
                });
                #[cfg(not(target_arch = "wasm32"))]
                if d.token_needed.is_none() && self.recent.urls().next().is_some() {
                    ui.separator();
                    ui.label("Recent remote logs:");
                    for url in self.recent.urls() {
                        if ui.link(url).clicked() {
                            d.url = url.to_owned();
                            go = true;
                        }
                    }
                }
            });
        if go && !d.url.trim().is_empty() {
            self.open_remote(d.url.trim(), d.token.trim());
        } else if open && !cancel {
            self.remote_dialog = Some(d);
        }
    }

    /// File > Quit: asks first what to do with a temporary log that holds frames (see
    /// [`crate::temp_log`]); otherwise tells the window to close.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit(&mut self, ctx: &egui::Context) {
        if self.temp_log_to_ask().is_some() {
            self.quit_dialog.get_or_insert_default();
        } else {
            self.quitting = true;
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }

    /// The window was told to close (it closes unless a question stops it).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit_requested(&self) -> bool {
        self.quitting
    }

    /// Whether the window asks what to do with its temporary log before quitting.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn asks_before_quitting(&self) -> bool {
        self.quit_dialog.is_some()
    }

    /// What became of the temporary log when quitting (where it is now), once decided.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn quit_note(&self) -> Option<&str> {
        self.quit_note.as_deref()
    }

    /// The temporary log to ask about before quitting: a listening window's own temporary
    /// directory, once it holds frames and until the user said what to do with it.
    #[cfg(not(target_arch = "wasm32"))]
    fn temp_log_to_ask(&self) -> Option<(PathBuf, u64)> {
        if self.quit_note.is_some() {
            return None;
        }
        let l = self.listener.as_ref()?;
        let dir = l.temp_dir()?;
        let frames = l.frames();
        (frames > 0).then(|| (dir.to_owned(), frames))
    }

    /// Closing the window (its close button, or File > Quit) while the temporary log holds
    /// frames asks first; the choice is carried out, then the window closes. An error keeps
    /// the dialog open and says what went wrong.
    #[cfg(not(target_arch = "wasm32"))]
    fn quit_dialog(&mut self, ctx: &egui::Context) {
        use crate::ui::quit_dialog::{self, QuitAction};
        let Some((dir, frames)) = self.temp_log_to_ask() else {
            self.quit_dialog = None;
            return;
        };
        if ctx.input(|i| i.viewport().close_requested()) {
            ctx.send_viewport_cmd(egui::ViewportCommand::CancelClose);
            self.quitting = false;
            self.quit_dialog.get_or_insert_default();
        }
        let Some(d) = &mut self.quit_dialog else {
            return;
        };
        match quit_dialog::show(ctx, d, &dir, frames) {
            Some(QuitAction::Cancel) => self.quit_dialog = None,
            Some(QuitAction::Quit(choice)) => {
                let Some(listener) = &mut self.listener else {
                    return;
                };
                match listener.settle(&choice) {
                    Ok(note) => {
                        // Said where the user started the window, too: the window closes now.
                        eprintln!("{note}");
                        self.quit_note = Some(note);
                        self.quit_dialog = None;
                        self.quitting = true;
                        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
                    }
                    Err(e) => d.error = Some(e),
                }
            }
            None => {}
        }
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn listen_dialog(&mut self, ctx: &egui::Context) {
        let Some(mut addr) = self.listen_dialog.take() else {
            return;
        };
        let mut open = true;
        let mut go = false;
        let mut cancel = false;
        egui::Window::new("Listen for programs")
            .collapsible(false)
            .resizable(false)
            .open(&mut open)
            .show(ctx, |ui| {
                ui.label("Address (127.0.0.1 unless FRAMELOG_TOKEN is set):");
                let r = ui
                    .add(TextEdit::singleline(&mut addr).desired_width(260.0))
                    .accessible_name("Listen address");
                let enter = r.lost_focus() && ui.input(|i| i.key_pressed(Key::Enter));
                ui.horizontal(|ui| {
                    go = ui.button("Listen").clicked() || enter;
                    cancel = ui.button("Cancel").clicked();
                });
                ui.label(
                    RichText::new(
                        "Programs started with FRAMELOG_CONNECT=ADDRESS are recorded into a temporary log this window follows.",
                    )
                    .weak(),
                );
            });
        if go {
            let token = std::env::var("FRAMELOG_TOKEN").ok();
            self.start_listening(addr.trim(), None, token);
        } else if open && !cancel {
            self.listen_dialog = Some(addr);
        }
    }
}

/// The category colors, in body text (readable: not small, not weak) with a swatch as tall
/// as the text.
fn legend(ui: &mut Ui) {
    let font = egui::TextStyle::Body.resolve(ui.style());
    let h = ui.fonts_mut(|f| f.row_height(&font));
    for c in Category::ALL {
        let (r, _) = ui.allocate_exact_size(egui::vec2(h, h), egui::Sense::hover());
        ui.painter()
            .rect_filled(r.shrink(1.0), 3.0, category_color(c));
        let text = RichText::new(c.to_string()).font(font.clone());
        let galley =
            ui.fonts_mut(|f| f.layout_no_wrap(c.to_string(), font.clone(), Color32::WHITE));
        ui.data_mut(|d| d.insert_temp(egui::Id::unique(LEGEND_TEXT_H), galley.size().y));
        ui.label(text);
    }
}

/// Where the legend's text height is kept for [`DebuggerApp::legend_text_height`].
const LEGEND_TEXT_H: &str = "framelog-legend-text-height";

impl eframe::App for DebuggerApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        DebuggerApp::ui(self, ui);
        let title = match self.log_source() {
            Some(s) => format!("framelog debugger — {s}"),
            None => "framelog debugger".to_owned(),
        };
        if title != self.title {
            self.title = title.clone();
            ui.ctx()
                .send_viewport_cmd(egui::ViewportCommand::Title(title));
        }
    }
}
