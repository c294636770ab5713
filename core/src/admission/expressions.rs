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
        self.get_or_compile(expression, false)
    }

    /// The program for a MutatingAdmissionPolicy's `expression`, where object literals make maps
    /// ([`Program::compile_mutation`]).
    pub fn get_mutation(&self, expression: &str) -> Result<Arc<Program>, String> {
        self.get_or_compile(expression, true)
    }

    fn get_or_compile(&self, expression: &str, mutation: bool) -> Result<Arc<Program>, String> {
        let key = if mutation {
            format!("\0{expression}")
        } else {
            expression.to_string()
        };
        if let Some(found) = self.compiled.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let compiled = if mutation {
            Program::compile_mutation(expression)
        } else {
            Program::compile(expression)
        };
        let program = Arc::new(compiled.map_err(|e| format!("compilation failed: {e}"))?);
        if let Ok(mut compiled) = self.compiled.lock() {
            if compiled.len() >= MAX_PROGRAMS {
                compiled.clear();
            }
            compiled.insert(key, program.clone());
        }
        Ok(program)
    }
}
