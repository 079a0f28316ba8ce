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
use crate::ui::compare::{self as compare_tab, ComparePanel};
use crate::ui::context_view::{self, ContextAction, ContextView};
use crate::ui::contexts::{self, ContextsPanel};
pub use crate::ui::data_panel::DataState;
use crate::ui::data_panel::{DataPanel, PanelAction};
use crate::ui::flame_graph::{self, FlameGraphState, ScopeInput};
use crate::ui::histogram::{self, HistogramPanel};
use crate::ui::messages_panel::{self, MessagesPanel};
use crate::ui::plot_tracks::{self, TracksState};
use crate::ui::query::{self as query_tab, QueryPanel};
use crate::ui::search_bar::SearchBar;
use crate::ui::slow_polls::{self, SlowPollsPanel};
use crate::ui::stats::{self, StatsPanel};
use crate::ui::timeline::{self, TimelineState};
use crate::ui::{category_color, status_bar};

mod dialogs;
mod menus;
mod panels;

use dialogs::RemoteDialog;
use menus::LEGEND_TEXT_H;

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
    /// The polls that blocked their thread, the longest first.
    SlowPolls,
    /// SQL over the open log directory (desktop only).
    Query,
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
    timeline: TimelineState,
    /// Whether the newly opened log was checked for live writers (Follow stays on only while
    /// the log is still growing).
    follow_checked: bool,
    flame_graph: FlameGraphState,
    context_view: ContextView,
    selected: Option<FrameRef>,
    selected_info: Option<FrameInfo>,
    data: DataPanel,
    search: SearchBar,
    contexts: ContextsPanel,
    stats: StatsPanel,
    histogram: HistogramPanel,
    messages_panel: MessagesPanel,
    slow_polls_panel: SlowPollsPanel,
    query_panel: QueryPanel,
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
    /// Records the model held when it was found finished (more: a writer joined).
    finished_at: u64,
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
            timeline: TimelineState::default(),
            follow_checked: false,
            flame_graph: FlameGraphState::default(),
            context_view: ContextView::default(),
            selected: None,
            selected_info: None,
            data: DataPanel::default(),
            search: SearchBar::default(),
            contexts: ContextsPanel::default(),
            stats: StatsPanel::default(),
            histogram: HistogramPanel::default(),
            messages_panel: MessagesPanel::default(),
            slow_polls_panel: SlowPollsPanel::default(),
            query_panel: QueryPanel::default(),
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
            finished_at: 0,
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
        self.timeline = TimelineState::default();
        self.follow_checked = false;
        self.finished = false;
        self.selected = None;
        self.selected_info = None;
        self.data.clear();
        self.search.clear();
        self.contexts = ContextsPanel::default();
        self.stats = StatsPanel::default();
        self.slow_polls_panel = SlowPollsPanel::default();
        self.query_panel.reset();
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
    pub fn timeline(&self) -> &TimelineState {
        &self.timeline
    }

    /// The flamegraph's view state, mutable (zoom, follow).
    pub fn timeline_mut(&mut self) -> &mut TimelineState {
        &mut self.timeline
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
        #[cfg(not(target_arch = "wasm32"))]
        self.query_panel.poll(&ctx);
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
            #[cfg(not(target_arch = "wasm32"))]
            let listening = self.listener.is_some();
            #[cfg(target_arch = "wasm32")]
            let listening = false;
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
                if let Some(l) = &log
                    && !listening
                    && !writing(l)
                {
                    // Finished: shown whole, and said so (not "Following").
                    self.timeline.set_follow(false);
                    self.timeline.zoom_to_fit();
                    self.finished = true;
                }
            } else if self.follow_checked {
                // Later, a log whose last writer stops says so (and one a writer joins is live
                // again, paused where the user left it): from what the model and the server
                // know, no file looked at.
                if self.finished {
                    // New records: a writer joined.
                    self.finished = model.record_count() == self.finished_at;
                } else if status.caught_up && !listening && !writers_left(model, &status) {
                    self.finished = true;
                    self.timeline.set_follow(false);
                }
            }
            if self.finished {
                self.finished_at = model.record_count();
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
                    slow_polls: model.polls().slow_polls().len() as u64,
                };
                let clicks = status_bar::show(ui, &info);
                if clicks.follow {
                    self.toggle_follow();
                }
                if clicks.slow_polls {
                    self.tab = BottomTab::SlowPolls;
                    self.show_bottom = true;
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
                            Some(PanelAction::Zoom(start, end)) => {
                                self.timeline.zoom_to(start, end)
                            }
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
                        self.bottom_panel(&mut tab, model, log.as_ref().and_then(OpenLog::dir));
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
                if status.loading() {
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
                            &mut self.timeline,
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
                        if let Some(label) = flame_graph::show(
                            ui,
                            &mut self.flame_graph,
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
                .timeline
                .zoom_to(e.time.saturating_sub(500_000), e.time + 500_000),
        }
    }

    /// Shows slow poll `s` on the timeline: the frame whose code blocked selected and
    /// revealed (its panel shown), or, its frame not in the log, the time around it.
    pub fn jump_to_slow_poll(&mut self, model: &Model, s: &crate::model::polls::SlowPollAt) {
        self.view = CentralView::Timeline;
        match s.frame {
            Some(at) => {
                self.select_and_reveal(model, at);
                self.show_data = true;
                // The thread it blocked may be another than the frame's first: its mark shows.
                self.timeline.collapsed.remove(&s.lane);
            }
            None => {
                let pad = s.duration_ns / 2 + 1;
                self.timeline
                    .zoom_to(s.start.saturating_sub(pad), s.end() + pad);
            }
        }
    }

    /// The Slow polls tab's state (the poll clicked last).
    pub fn slow_polls_panel(&self) -> &SlowPollsPanel {
        &self.slow_polls_panel
    }

    /// The Query tab's state (its SQL, the last result, the row clicked last).
    pub fn query_panel(&self) -> &QueryPanel {
        &self.query_panel
    }

    /// The Query tab's state, mutable (its SQL).
    pub fn query_panel_mut(&mut self) -> &mut QueryPanel {
        &mut self.query_panel
    }

    /// Shows the frame a query's row names: selected and revealed on the timeline (its
    /// panel shown), or, not on the timeline (yet), a note in the tab.
    pub fn jump_to_slice(&mut self, model: &Model, key: formats::FrameKey) {
        match model.find(key) {
            Some(at) => {
                self.view = CentralView::Timeline;
                self.select_and_reveal(model, at);
                self.show_data = true;
            }
            None => {
                self.query_panel.note = Some(format!(
                    "Slice {} (worker {}, frame {}) is not on the timeline",
                    (i64::from(key.worker) << 32) | i64::from(key.id),
                    key.worker,
                    key.id
                ));
            }
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
    pub fn flame_graph(&self) -> &FlameGraphState {
        &self.flame_graph
    }

    /// The timeline's visible time range (ns since the epoch), once it has shown frames.
    fn view_range(&self) -> Option<(u64, u64)> {
        self.timeline.base.map(|b| {
            let from = b as f64 + self.timeline.start.max(0.0);
            (from as u64, (from + self.timeline.width.max(1.0)) as u64)
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
            selection: self.timeline.selection,
            context,
        }
    }

    /// Whether the view keeps up with the log (following its newest time, or fitted to all
    /// of it, which grows with it).
    pub fn is_following(&self) -> bool {
        self.timeline.follow || self.timeline.fitted
    }

    fn toggle_follow(&mut self) {
        if self.is_following() {
            // Pause: the view stays where it is now.
            self.timeline.set_follow(false);
            self.timeline.fitted = false;
        } else {
            self.timeline.set_follow(true);
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

    /// Brings a frame into view: centered, zoomed so it takes a quarter of the view (wide
    /// enough to be drawn as itself, never inside a merged box, with context on both sides),
    /// its lane scrolled to.
    fn reveal(&mut self, model: &Model, info: FrameInfo) {
        let dur = info.duration.max(1) as f64;
        let width = (dur * 4.0).max(1_000.0);
        let center = info.start as f64 + dur / 2.0;
        let start = (center - width / 2.0).max(0.0) as u64;
        self.timeline.zoom_to(start, start + width as u64);
        // Expand its lane and scroll it into view.
        self.timeline.collapsed.remove(&info.at.lane);
        let (lanes, _) = timeline::layout(model, &self.timeline.collapsed);
        if let Some(&(_, y, _)) = lanes.iter().find(|l| l.0 == info.at.lane) {
            let row_y = y + timeline::LANE_HEADER_H + info.at.row as f32 * timeline::ROW_H;
            self.timeline.scroll_y = (row_y - 60.0).max(0.0);
        }
    }
}

impl DebuggerApp {}

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

/// Whether any process still writes the open log, as far as the window knows: the server's
/// list for a remote log, else the model's workers (announced and not found stopped).
fn writers_left(model: &Model, status: &IngestStatus) -> bool {
    match &status.writers {
        Some(writers) => !writers.is_empty(),
        None => (0..=u8::MAX).any(|w| {
            let wk = model.worker(w);
            !wk.name.is_empty() && !wk.stopped
        }),
    }
}
