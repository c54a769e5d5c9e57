// Feeding a ReflectorSink (kube/kube_reflector.h) by hand, as a
// reflector would: an ADDED/MODIFIED event, a DELETED event, a whole list.
// Each object is JSON text; text that does not parse fails the test.
#ifndef PDC_TESTS_TESTING_REFLECTOR_FEED_H_
#define PDC_TESTS_TESTING_REFLECTOR_FEED_H_

#include <string>
#include <vector>

#include "api/json_util.h"
#include "kube/kube_reflector.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"

namespace pdc::testing {

inline void Put(pdc::kube::ReflectorSink* sink, const std::string& json) {
  rapidjson::Document d;
  ASSERT_TRUE(api::json::Parse(json, &d).ok()) << json;
  sink->Upsert(d);
}

inline void Delete(pdc::kube::ReflectorSink* sink, const std::string& json) {
  rapidjson::Document d;
  ASSERT_TRUE(api::json::Parse(json, &d).ok()) << json;
  sink->Remove(d);
}

// A relist: `objects` are all there is.
inline void List(pdc::kube::ReflectorSink* sink, const std::vector<std::string>& objects) {
  std::vector<rapidjson::Document> docs(objects.size());
  std::vector<const api::json::Value*> items;
  for (size_t i = 0; i < objects.size(); ++i) {
    ASSERT_TRUE(api::json::Parse(objects[i], &docs[i]).ok()) << objects[i];
    items.push_back(&docs[i]);
  }
  sink->Replace(items);
}

}  // namespace pdc::testing

#endif  // PDC_TESTS_TESTING_REFLECTOR_FEED_H_
