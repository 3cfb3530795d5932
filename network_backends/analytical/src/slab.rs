//! Slots for in-flight messages or flows, reused once they finish, so ids stay small
//! and nothing is allocated per message in steady state.

pub struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    pub fn insert(&mut self, item: T) -> u32 {
        match self.free.pop() {
            Some(s) => {
                self.items[s as usize] = Some(item);
                s
            }
            None => {
                self.items.push(Some(item));
                (self.items.len() - 1) as u32
            }
        }
    }
    pub fn remove(&mut self, slot: u32) -> T {
        self.free.push(slot);
        self.items[slot as usize].take().expect("slot in use")
    }
    pub fn get(&self, slot: u32) -> &T {
        self.items[slot as usize].as_ref().expect("slot in use")
    }
    pub fn get_mut(&mut self, slot: u32) -> &mut T {
        self.items[slot as usize].as_mut().expect("slot in use")
    }
}
