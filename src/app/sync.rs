//! Several stations on one library (issue #46). A label edit is checked against the version
//! the window read ([`super::state::Details::versions`]): a change another station made since
//! is never overwritten silently, the reviewer is told who changed what, and the window reads
//! the label again. Every few seconds the window asks the library whether anything moved (one
//! cheap query, [`Store::change_mark`], on SQLite and PostgreSQL alike) and, when it did, shows
//! what other stations changed and reads again what it shows.

use super::App;
use super::state::ToastLevel;
use crate::store::{
    ChangeMark, IMPORTER_PREFIX, LabelWritten, LibraryAudit, OpenMode, Store, StoreError,
    TargetKind,
};
use std::time::{Duration, Instant};

/// How often the window asks the library whether another station changed it.
pub const SYNC_EVERY: Duration = Duration::from_secs(2);

/// Other stations' changes at most named one by one in the toast.
const NAMED_CHANGES: usize = 3;

/// Watching the open library for other stations' changes.
#[derive(Debug, Clone)]
pub struct LibrarySync {
    /// How often the library is asked ([`SYNC_EVERY`]; tests set it).
    pub every: Duration,
    /// When it was asked last (the library's opening counts).
    last: Option<Instant>,
    /// Where the library stood when the window last read it.
    pub(super) mark: ChangeMark,
    /// The last look's problem, said once.
    problem: Option<String>,
}

impl Default for LibrarySync {
    fn default() -> Self {
        LibrarySync {
            every: SYNC_EVERY,
            last: None,
            mark: ChangeMark::default(),
            problem: None,
        }
    }
}

impl LibrarySync {
    /// A library was just read at `mark`: the next look is one interval away.
    pub(super) fn opened(&mut self, mark: ChangeMark) {
        self.mark = mark;
        self.last = Some(Instant::now());
        self.problem = None;
    }
}

impl App {
    /// Writes a label through the store's audited path, checked against `read` (the version
    /// the window showed; `None`: unchecked). A conflict is told as a toast naming who changed
    /// what since, and what the window shows is read again. `None` when nothing was written.
    pub(super) fn write_label(
        &mut self,
        target: TargetKind,
        id: i64,
        key: &str,
        value: Option<String>,
        read: Option<i64>,
    ) -> Option<LabelWritten> {
        let reviewer = self.state.reviewer.clone();
        let lib = self.state.library.as_mut()?;
        let written = lib
            .store
            .change_label(&reviewer, target, id, key, value.as_deref(), read);
        match written {
            Ok(written) => {
                if let Some(labels) = self.state.details.versions.get_mut(&(target, id)) {
                    labels.insert(key.to_string(), written.version);
                }
                // The window's own change, right after what it last saw: not news at the next
                // look (the caller reads again what it shows).
                let mark = &mut self.state.sync.mark;
                if written.version == mark.audit + 1 {
                    mark.audit = written.version;
                }
                Some(written)
            }
            Err(StoreError::Conflict { changes, .. }) => {
                let name = self.target_name(target, id);
                let yours = value.map_or("none".to_string(), |v| format!("'{v}'"));
                self.state.toast(
                    ToastLevel::Error,
                    format!(
                        "{name} {key}: changed on another station after you read it, by \
                         {changes}; your {yours} was not written. The window now shows the \
                         library's value: set yours again if it still holds."
                    ),
                );
                self.refresh_tree();
                self.load_details();
                None
            }
            Err(e) => {
                self.state.toast(ToastLevel::Error, e.to_string());
                None
            }
        }
    }

    /// A label's target as the reviewer knows it: a polyp's code, an image's file.
    fn target_name(&self, target: TargetKind, id: i64) -> String {
        let store = self.state.library.as_ref().map(|l| &l.store);
        let named = store.and_then(|s| match target {
            TargetKind::Polyp => Some(format!("polyp {}", s.polyp(id).ok()??.code)),
            TargetKind::Media => Some(format!("image {}", s.media(id).ok()??.rel_path)),
            _ => None,
        });
        named.unwrap_or_else(|| format!("{} {id}", target.as_str()))
    }

    /// Asks the library, once per [`LibrarySync::every`], whether it moved; when it did, says
    /// what other stations changed and reads again what the window shows. A connection the
    /// server ended (a restart) is opened again.
    pub(super) fn poll_library(&mut self, ctx: &egui::Context) {
        let Some(lib) = &self.state.library else {
            return;
        };
        let sync = &mut self.state.sync;
        ctx.request_repaint_after(sync.every.max(Duration::from_millis(250)));
        let now = Instant::now();
        if sync
            .last
            .is_some_and(|t| now.duration_since(t) < sync.every)
        {
            return;
        }
        sync.last = Some(now);
        let seen = sync.mark;
        let looked = lib.store.change_mark().and_then(|mark| {
            let changes = match mark.audit > seen.audit {
                true => lib.store.changes_after(seen.audit)?,
                false => Vec::new(),
            };
            Ok((mark, changes))
        });
        match looked {
            Ok((mark, _)) if mark == seen => self.state.sync.problem = None,
            Ok((mut mark, changes)) => {
                mark.audit = changes
                    .last()
                    .map_or(mark.audit, |c| c.entry.id.max(mark.audit));
                self.state.sync.opened(mark);
                self.announce(&changes);
                self.read_again();
            }
            Err(StoreError::ConnectionLost(why)) => self.reconnect(&why),
            Err(e) => self.say_once(format!("cannot look for other stations' changes: {e}")),
        }
    }

    /// Names other stations' changes in one toast (this reviewer's own, and importers', are
    /// not news).
    fn announce(&mut self, changes: &[LibraryAudit]) {
        let reviewer = &self.state.reviewer;
        let others: Vec<&LibraryAudit> = changes
            .iter()
            .filter(|c| &c.entry.who != reviewer && !c.entry.who.starts_with(IMPORTER_PREFIX))
            .collect();
        if others.is_empty() {
            return;
        }
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".into());
        let mut lines: Vec<String> = others
            .iter()
            .take(NAMED_CHANGES)
            .map(|c| {
                format!(
                    "{} set {} of {}: {} -> {}",
                    c.entry.who,
                    c.entry.key,
                    c.target_name,
                    shown(&c.entry.old_value),
                    shown(&c.entry.new_value)
                )
            })
            .collect();
        if others.len() > NAMED_CHANGES {
            lines.push(format!("and {} more", others.len() - NAMED_CHANGES));
        }
        self.state.toast(
            ToastLevel::Info,
            format!("Changed on another station: {}", lines.join("; ")),
        );
    }

    /// Reads again everything the window shows of the library.
    fn read_again(&mut self) {
        self.after_edit();
        self.refresh_histology_options();
    }

    /// The server ended the window's session (a restart, a cut connection): connect again and
    /// read the library as it is now, or say that the server cannot be reached (once; the next
    /// looks try again).
    fn reconnect(&mut self, why: &str) {
        let Some(lib) = &mut self.state.library else {
            return;
        };
        let name = crate::store::library_name(&lib.path);
        match Store::open(&lib.path, OpenMode::Existing) {
            Ok(store) => {
                let mark = store.change_mark();
                lib.store = store;
                if let Ok(mark) = mark {
                    self.state.sync.opened(mark);
                }
                self.state.sync.problem = None;
                self.state.toast(
                    ToastLevel::Warning,
                    format!(
                        "{name}: the connection to the library's server was lost ({why}); \
                         connected again, the window shows the library as it is now (a change \
                         made just before may not have been saved: look at it again)"
                    ),
                );
                self.read_again();
            }
            Err(e) => self.say_once(format!(
                "{name}: the connection to the library's server was lost and cannot be made \
                 again yet ({e}); the window tries again every {} s",
                self.state.sync.every.as_secs().max(1)
            )),
        }
    }

    fn say_once(&mut self, problem: String) {
        if self.state.sync.problem.as_ref() != Some(&problem) {
            self.state.toast(ToastLevel::Error, problem.clone());
            self.state.sync.problem = Some(problem);
        }
    }
}
