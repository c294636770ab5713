//! CEL programs compiled once per expression text and shared by every request (webhook match conditions,
//! admission policies): compiling is the costly part, and configurations change rarely.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use apiserver_cel::Program;

/// Compiled programs by source text.
#[derive(Default)]
pub(crate) struct Programs {
    compiled: Mutex<HashMap<String, Arc<Program>>>,
}

/// How many programs are kept before the cache starts over (configurations that keep changing their
/// expressions cannot grow it without bound).
const MAX_PROGRAMS: usize = 4096;

impl Programs {
    /// The program for `expression`; the error is upstream's `compilation failed: ...`.
    pub fn get(&self, expression: &str) -> Result<Arc<Program>, String> {
        if let Some(found) = self
            .compiled
            .lock()
            .ok()
            .and_then(|c| c.get(expression).cloned())
        {
            return Ok(found);
        }
        let program =
            Arc::new(Program::compile(expression).map_err(|e| format!("compilation failed: {e}"))?);
        if let Ok(mut compiled) = self.compiled.lock() {
            if compiled.len() >= MAX_PROGRAMS {
                compiled.clear();
            }
            compiled.insert(expression.to_string(), program.clone());
        }
        Ok(program)
    }
}
